"""Sentence embedders: the semantic search channel's adapters (a local model, an embeddings endpoint).

A floor beside storage: it imports only the kernel, and projections (the vectors read model) and application
services (the query's embedding) import it.
"""
