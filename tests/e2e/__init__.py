"""End-to-end tests: the app in a real browser (a package, so that its conftest is not `conftest`)."""
