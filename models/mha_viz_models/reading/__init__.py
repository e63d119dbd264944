"""Reading heads off a loaded model: z, W_O and values (`heads`, `values`), the read-out, what a capture records,
the checks at load and the hooks on shared layers.
"""
