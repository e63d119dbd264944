"""Every figure of mha-viz: plain functions from arrays and runs to `plotly.graph_objects.Figure`,
one module per family of views (`heads`, `line_view`, `focus`, `metrics`, `comparison`, `corpus`,
`cross`, `generation`, `qk`, `teaching`, `attribution`), what they share in `style`. The app's
pages and notebooks call the same functions; nothing here knows Streamlit."""
