"""Results out of the app: the self-contained HTML report (`report`) and a view as URL parameters (`link_params`)."""
