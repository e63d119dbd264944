"""The app's shell: one run of the script (`main`), the navigation, the sidebar, the current run (`state`), links,
lessons and exports. It imports the kit, never a page (the navigation loads the pages by their records)."""
