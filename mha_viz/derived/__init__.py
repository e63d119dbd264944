"""Runs derived from a long run block by block (*Hide tokens*, the contributions lens): `run.hide_tokens`,
`run.contributions`."""
