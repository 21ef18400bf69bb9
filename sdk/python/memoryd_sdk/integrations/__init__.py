"""memoryd inside agent frameworks: each module is behind its own extra, with the framework as its dependency."""
