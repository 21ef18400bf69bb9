"""Storage: the database, its schema and migrations, and the directory of users, tokens and sessions.

It imports only the kernel."""
