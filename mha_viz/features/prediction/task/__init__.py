"""*Heads behind a prediction* over a task: a method over a set of pairs, a task's circuit of edges and its
faithfulness band."""
