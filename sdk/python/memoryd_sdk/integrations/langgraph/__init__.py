"""memoryd for LangGraph (``pip install 'memoryd-sdk[langgraph]'``): a ``BaseStore``, per-turn recall, the tools.

- ``MemorydStore(server, async_server=None, *, scope="user")``: LangGraph's store over memoryd memories.
- ``memoryd_prompt(session)``: a ``create_react_agent`` prompt (or pre-model hook) that puts the session's
  memories in front of the model once per user turn, replacing its earlier block, failing open.
- ``memoryd_tools(session)``: the session's memory tool as LangChain tools (save, search, get, delete, list).
"""

from memoryd_sdk.integrations.langgraph._store import MemorydStore, StoreLimitError

__all__ = ["MemorydStore", "StoreLimitError"]
