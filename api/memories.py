"""The public memory API: ``/v1/api/memories``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from commands.model import DeleteMemory, SaveMemory
from memoryd.access import public_namespace
from memoryd.domain import REST_MAX_CONTENT, normalize_name
from memoryd.errors import ValidationError
from projections.queries import MemoryFilter, ScopePattern, list_memories, search_memories

from api.context import authorized, caller, event_metadata, json_object, services
from api.responses import memory_list, respond, written_memory
from api.schemas import (
    DeletedSchema,
    DeleteMemoryQuery,
    ListMemoriesQuery,
    SaveMemoryRequest,
    SearchMemoriesRequest,
    load,
)

blueprint = Blueprint("memories", __name__, url_prefix="/v1/api/memories")


@blueprint.get("")
@authorized("read")
def list_() -> tuple[Response, int]:
    args = load(ListMemoriesQuery(), request.args)
    with services().database.read() as conn:
        return memory_list(list_memories(conn, _visible(args), args["limit"]))


@blueprint.post("")
@authorized("write")
def save() -> tuple[Response, int]:
    body = load(SaveMemoryRequest(), json_object())
    command = SaveMemory.validated(
        name=body["name"],
        content=body["content"],
        description=body["description"],
        type=body["type"],
        max_content=REST_MAX_CONTENT,
        resolve_namespace=lambda: public_namespace(caller(), body["scope"], body["scope_id"], services().directory),
    )
    return written_memory(services().bus.handle(command, event_metadata("rest")))


@blueprint.post("/search")
@authorized("read")
def search() -> tuple[Response, int]:
    body = load(SearchMemoriesRequest(), json_object())
    with services().database.read() as conn:
        return memory_list(search_memories(conn, _visible(body), body["query"], body["limit"]))


@blueprint.delete("/<path:name>")
@authorized("write")
def delete(name: str) -> tuple[Response, int]:
    args = load(DeleteMemoryQuery(), request.args)
    namespace = public_namespace(caller(), args["scope"], args["scope_id"], services().directory)
    outcome = services().bus.handle(DeleteMemory(normalize_name(name), namespace), event_metadata("rest"))
    return respond(DeletedSchema(), {"status": "ok", "name": outcome.memory.name}, position=outcome.position)


def _visible(args: dict[str, Any]) -> MemoryFilter:
    """An explicit scope, or the caller's envelope: global plus their own user scope."""
    if args["scope"]:
        namespace = public_namespace(caller(), args["scope"], args["scope_id"], services().directory)
        pattern = ScopePattern("global") if namespace.scope == "global" else ScopePattern(namespace.scope, namespace.scope_id)
        return MemoryFilter(type=args["type"], scopes=(pattern,))
    if args["scope_id"]:
        raise ValidationError("scope is required when scope_id is provided")
    return MemoryFilter(type=args["type"], scopes=(ScopePattern("global"), ScopePattern("user", caller().user_id)))
