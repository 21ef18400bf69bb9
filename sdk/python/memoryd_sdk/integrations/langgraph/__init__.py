"""memoryd for LangGraph (``pip install 'memoryd-sdk[langgraph]'``): a ``BaseStore``, per-turn recall, the tools.

- ``MemorydStore(server, async_server=None, *, scope="user")``: LangGraph's store over memoryd memories.
- ``MemorydRecall(session)``: ``.prompt`` for ``create_react_agent`` (or ``.pre_model_hook``, or
  ``.compose(messages)`` in a hand-written graph) puts the session's memories in front of the model once
  per user turn, replacing its earlier block, failing open.
- ``memoryd_tools(session)``: the session's memory tool as LangChain tools (save, search, get, delete, list).
"""

try:
    import langchain_core  # noqa: F401
    import langgraph.store.base  # noqa: F401
except ImportError as missing:  # pragma: no cover - the extra was not installed
    raise ImportError("memoryd_sdk.integrations.langgraph needs LangGraph: pip install 'memoryd-sdk[langgraph]'"
                      ) from missing

from memoryd_sdk.integrations.langgraph._recall import BLOCK_ID, MemorydRecall
from memoryd_sdk.integrations.langgraph._store import MemorydStore, StoreLimitError
from memoryd_sdk.integrations.langgraph._tools import memoryd_tools

__all__ = ["BLOCK_ID", "MemorydRecall", "MemorydStore", "StoreLimitError", "memoryd_tools"]
