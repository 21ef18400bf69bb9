"""The public memory API: ``/v1/api/memories``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from api.access import public_filter, public_namespace
from api.answer_schemas import MemorySchema
from api.batch_schemas import load_writes
from api.consistency import after_position
from api.context import authorized, caller, json_object, services, writing
from api.cursors import cursor_of
from api.idempotency import idempotent
from api.preconditions import expected_version, tagged
from api.responses import (
    batch_at,
    deleted_memory,
    memory_list,
    memory_page,
    outcome_at,
    respond,
    written_batch,
    written_memory,
)
from api.schemas import ListMemoriesQuery, NamedMemoryQuery, SaveMemoryRequest, SearchMemoriesRequest, load
from commands.model import DeleteMemory, SaveMemory
from memoryd.kernel.domain import clean_name
from memoryd.kernel.errors import MemorydError, NotFound
from projections.filters import MemoryFilter
from projections.queries import Keyset, find_memory, list_memories

blueprint = Blueprint("memories", __name__, url_prefix="/v1/api/memories")


@blueprint.get("")
@authorized("read")
@after_position
def list_() -> tuple[Response, int]:
    args = load(ListMemoriesQuery(), request.args)
    with services().database.read() as conn:
        rows = list_memories(conn, _visible(args), args["limit"] + 1, args["after"])  # one more: is there a next page?
    page = rows[:args["limit"]]
    return memory_page(page, cursor_of(Keyset.of(page[-1])) if len(rows) > len(page) else None)


@blueprint.post("")
@authorized("write")
@idempotent(lambda position: written_memory(outcome_at(position)))
def save() -> tuple[Response, int]:
    body = load(SaveMemoryRequest(), json_object())  # the fields, checked and cleaned once
    version = expected_version()
    namespace = public_namespace(caller(), body["scope"], body["scope_id"], services().directory)
    command = SaveMemory(body["name"], body["content"], body["description"], body["type"], namespace, version)
    return written_memory(services().bus.handle(command, *writing("rest")))


@blueprint.post("/batch")
@authorized("write")
@idempotent(batch_at)
def write_batch() -> tuple[Response, int]:
    """Saves and deletes in order, in one transaction: all of them or none (a refusal names the write)."""
    writes = load_writes(json_object())
    commands = [_write_command(index, write) for index, write in enumerate(writes)]
    return written_batch(commands, services().bus.write_many(commands, *writing("rest")))


def _write_command(index: int, write: dict[str, Any]) -> SaveMemory | DeleteMemory:
    """A write's command: its fields were checked and cleaned by the schema; its scope is resolved here."""
    try:
        namespace = public_namespace(caller(), write["scope"], write["scope_id"], services().directory)
    except MemorydError as error:
        error.message = f"writes[{index}]: {error.message}"
        error.args = (error.message,)
        raise
    if write["action"] == "delete":
        return DeleteMemory(write["name"], namespace, write["expected_version"], write["missing_ok"])
    return SaveMemory(write["name"], write["content"], write["description"], write["type"], namespace,
                      write["expected_version"])


@blueprint.post("/search")
@authorized("read")
@after_position
def search() -> tuple[Response, int]:
    body = load(SearchMemoriesRequest(), json_object())
    with services().database.read() as conn:
        return memory_list(services().search.memories(conn, _visible(body), body["query"], body["limit"],
                                                      body["offset"]))


@blueprint.get("/<anything:name>")
@authorized("read")
@after_position
def get(name: str) -> tuple[Response, int]:
    """One memory by name, in the scope the query names (``global`` by default), with delete's scope rules."""
    args = load(NamedMemoryQuery(), request.args)
    namespace = public_namespace(caller(), args["scope"], args["scope_id"], services().directory)
    name = clean_name(name)
    with services().database.read() as conn:
        row = find_memory(conn, name, namespace)
    if row is None:
        raise NotFound(f"Memory '{name}' not found")
    return tagged(respond(MemorySchema(), row), row["version"])


@blueprint.delete("/<anything:name>")
@authorized("write")
@idempotent(lambda position: deleted_memory(outcome_at(position)))
def delete(name: str) -> tuple[Response, int]:
    args = load(NamedMemoryQuery(), request.args)
    namespace = public_namespace(caller(), args["scope"], args["scope_id"], services().directory)
    command = DeleteMemory(clean_name(name), namespace, expected_version=expected_version())
    return deleted_memory(services().bus.handle(command, *writing("rest")))


def _visible(args: dict[str, Any]) -> MemoryFilter:
    return public_filter(caller(), args["type"], args["scope"], args["scope_id"], services().directory)
