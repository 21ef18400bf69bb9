"""Names other SDKs use, bound to memoryd's classes, so their code runs with a changed import."""
