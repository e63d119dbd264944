"""The Streamlit layer: sidebar, views and page scripts. The only package that imports streamlit."""
