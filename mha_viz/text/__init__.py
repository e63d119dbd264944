"""Text in: the one door from text to token ids (`tokenize`), readable tokens and word groups (`readable`), the
prefix a token cap reads (`prefix`).
"""
