"""The pages, one a feature (`mha_viz.catalogue`): `pages/<id>.py`, or a folder `pages/<id>/` whose `__init__`
draws the page and whose other modules are its parts. A page imports the kit and the shell, never another page."""
