"""A long text, every head at once, in one pass: `run.scan` reduces each layer's probabilities a block
of query rows at a time (`rows`) to the head table's measures (`metrics.row_kernels`, `metrics.row_stats`),
each row's heaviest keys and thumbnails (`kept` on a GPU), kept in a `result.Scan`."""
