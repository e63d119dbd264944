"""The Head view's *Links* section: the token strip, a query's kept keys and exact row, the heaviest links and their
distances."""
