"""What every feature's figures share (the kernel's drawing): `style` (colours, the pattern classes' colours,
margins, titles, colour bars), `heads` (one head's map, the layers × heads grid of thumbnails, images),
`metrics` (a value per head as a layers × heads grid, similarity maps), `cross` (an encoder–decoder's cross
attention), `effective` (a hybrid's non-softmax layers) and `offline` (plotly.js in a notebook, no CDN). Importing the
package makes Plotly remember how it parsed each property path (`plotly_paths`: building a figure took 40 % less).
A feature's own figures live in its folder (`mha_viz/features/<id>/figures.py`); `mha_viz.figures` is the
public face over both."""

from mha_viz.drawing import plotly_paths

plotly_paths.remember()
