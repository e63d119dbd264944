"""The app's features, one folder each: its record (`FEATURE`, a `mha_viz.catalogue.Feature`) in the folder's
`__init__`, and its notebook recipe; `mha_viz.catalogue` finds them. Nothing here lists them."""
