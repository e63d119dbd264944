"""*Heads behind a prediction*'s layers × heads grids and the panel of one head."""
