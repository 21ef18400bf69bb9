"""The HTTP API: translates requests into commands and queries, and results into JSON."""
