"""The session's memory tool as LangChain tools: ``memory_save``, ``memory_search``, ``memory_get``,
``memory_delete`` and ``memory_list``, as ``memoryd mcp`` shows them.

A refusal (no such memory, a name taken in another scope, a version moved on) comes back as the
tool's error message, which the model reads and can act on; so does memoryd being unreachable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from memoryd_sdk._async import AsyncSession
from memoryd_sdk._sync import Session
from memoryd_sdk.errors import MemorydError
from memoryd_sdk.models import ToolResult

MemoryType = Literal["user", "general", "feedback", "reference"]
Scope = Literal["global", "workstream", "user", "coordinator", "project"]


class SaveArguments(BaseModel):
    name: str = Field(description="snake_case name, unique in its scope")
    content: str = Field(description="what to remember")
    description: str = Field(description="a one-line relevance summary")
    type: MemoryType | None = None
    scope: Scope | None = Field(None, description="default: the attached project, else global")
    expected_version: int | None = Field(None, description="save only if the memory is still at this version")


class NameArguments(BaseModel):
    name: str = Field(description="the name a search or list showed")
    scope: Scope | None = None


class DeleteArguments(NameArguments):
    expected_version: int | None = Field(None, description="delete only if the memory is still at this version")


class SearchArguments(BaseModel):
    query: str = Field(description="words to look for (BM25)")
    type: MemoryType | None = None
    scope: Scope | None = None
    limit: int | None = Field(None, description="default 20, at most 50")


class ListArguments(BaseModel):
    type: MemoryType | None = None
    scope: Scope | None = None
    limit: int | None = Field(None, description="default 20, at most 50")


TOOLS: dict[str, tuple[type[BaseModel], str]] = {
    "save": (SaveArguments, "Save a memory, or update the one of this name in its scope. The description is a "
                            "one-line relevance summary; save corrections as type 'feedback'."),
    "search": (SearchArguments, "The memories that best match the query (BM25), across every scope this session "
                                "sees unless one is given."),
    "get": (NameArguments, "A memory's full content, by the name (and scope) a search or list showed."),
    "delete": (DeleteArguments, "Delete a memory by name (and scope). It stays in memoryd's audit log."),
    "list": (ListArguments, "The most recently updated memories this session sees."),
}


def memoryd_tools(session: Session, async_session: AsyncSession | None = None) -> list[BaseTool]:
    """The five memory tools over ``session`` (and ``async_session`` for async runs, if given)."""
    return [StructuredTool.from_function(func=_sync_call(session, action),
                                         coroutine=_async_call(async_session, action) if async_session else None,
                                         name=f"memory_{action}", description=description, args_schema=arguments,
                                         handle_tool_error=True)
            for action, (arguments, description) in TOOLS.items()]


def _sync_call(session: Session, action: str) -> Callable[..., str]:
    def call(**arguments: Any) -> str:
        try:
            return _answer(session.memory(action, **_given(arguments)))
        except MemorydError as error:
            raise ToolException(f"memoryd could not run memory {action}: {error}") from None

    return call


def _async_call(session: AsyncSession, action: str) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        try:
            return _answer(await session.memory(action, **_given(arguments)))
        except MemorydError as error:
            raise ToolException(f"memoryd could not run memory {action}: {error}") from None

    return call


def _given(arguments: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in arguments.items() if value is not None}


def _answer(result: ToolResult) -> str:
    if not result.ok:
        raise ToolException(result.text)
    return result.text
