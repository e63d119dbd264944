"""The UI's kit: what the pages and the shell share (the session and its keys, charts, jobs, the shared head,
the server's resources). It imports nothing from `ui/shell` nor any feature."""
