"""Views of a captured run: level of detail for one head, token focus, the long-text overview, queries and keys,
the teaching walkthrough, two runs compared.
"""
