"""*Heads behind a prediction*'s *Circuit* section: edge attribution over the page's pair, the circuit graph of the
strongest edges and its paths patched again."""
