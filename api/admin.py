"""The administrators' API: ``/v1/api/admin/memories``, the audit trail and the log itself.

No automatic scope resolution: any scope may be filtered on, limits are
clamped rather than rejected, and list ``total`` counts every match.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Any

from flask import Blueprint, Response, request

from api.answer_schemas import (
    AuditPageSchema,
    ChainPageSchema,
    ErasureCertificateSchema,
    ErasurePreviewSchema,
    EventPageSchema,
    MemoryHistorySchema,
    MemorySchema,
)
from api.consistency import after_position
from api.context import authorized, json_object, services, writing
from api.idempotency import idempotent
from api.preconditions import expected_version, tagged
from api.responses import deleted_by_id, memory_list, outcome_at, respond, written_memory
from api.schemas import (
    AdminListQuery,
    AdminSearchQuery,
    AsOfQuery,
    AuditQuery,
    ChainPageQuery,
    EditMemoryRequest,
    ErasurePreviewQuery,
    ErasureRequest,
    EventsQuery,
    RestoreMemoryRequest,
    load,
)
from commands.model import DeleteMemoryById, SaveMemory
from commands.restore import RestoreMemory
from events.audit import AuditQuery as AuditFilter
from events.audit import list_audit, memory_history
from events.chain import GENESIS, Checkpoint
from events.streams import stream_of
from events.whole_log import verify_page
from memoryd.kernel.domain import Namespace
from memoryd.kernel.errors import NotFound, ValidationError
from projections.as_of import list_as_of, memory_as_of, search_as_of
from projections.filters import MemoryFilter, ScopePattern
from projections.queries import count_memories, get_memory, list_memories

blueprint = Blueprint("admin", __name__, url_prefix="/v1/api/admin")

LIST_LIMIT = (1, 200)
POSITION = re.compile(r"[0-9]{1,18}")  # an as_of position: ASCII digits, within a BIGINT
SEARCH_LIMIT = (1, 50)


@blueprint.get("/memories")
@authorized("read", admin=True)
@after_position
def list_() -> tuple[Response, int]:
    args = load(AdminListQuery(), request.args)
    where, first = _filter(args), args["offset"]
    last = first + _clamp(args["limit"], LIST_LIMIT)
    if (position := _as_of(args)) is not None:
        found = list_as_of(services().store, where, position)
        return _at(memory_list([historic.row() for historic in found[first:last]], total=len(found)), position)
    with services().database.read() as conn:  # a page is the newest `last`, less the first `first`
        rows = list_memories(conn, where, last)[first:]
        return memory_list(rows, total=count_memories(conn, where))


@blueprint.get("/memories/search")
@authorized("read", admin=True)
@after_position
def search() -> tuple[Response, int]:
    args = load(AdminSearchQuery(), request.args)
    limit = _clamp(args["limit"], SEARCH_LIMIT)
    if (position := _as_of(args)) is not None:
        found = search_as_of(services().store, _filter(args), args["q"], limit, position,
                             services().search.empty_index(), services().search.fused)
        return _at(memory_list([historic.row() for historic in found]), position)
    with services().database.read() as conn:
        return memory_list(services().search.memories(conn, _filter(args), args["q"], limit))


@blueprint.get("/memories/<memory_id>")
@authorized("read", admin=True)
@after_position
def get(memory_id: str) -> tuple[Response, int]:
    if (position := _as_of(load(AsOfQuery(), request.args))) is not None:
        stream_id = stream_of(services().store, services().locator, memory_id)
        found = memory_as_of(services().store, stream_id, memory_id, position) if stream_id else None
        if found is None:
            raise NotFound(f"Memory not found at position {position}")
        return _at(tagged(respond(MemorySchema(), found.row()), found.version), position)
    with services().database.read() as conn:
        row = get_memory(conn, memory_id)
    if row is None:
        raise NotFound("Memory not found")
    return tagged(respond(MemorySchema(), row), row["version"])


@blueprint.patch("/memories/<memory_id>")
@authorized("write", admin=True)
@idempotent(lambda position: written_memory(outcome_at(position)))
def edit(memory_id: str) -> tuple[Response, int]:
    """Change a memory's content, description or type, in whichever scope it is; always at a version: the
    one ``If-Match`` names, else the one read here, so an edit never revives a memory deleted meanwhile."""
    body = load(EditMemoryRequest(), json_object())
    with services().database.read() as conn:
        row = get_memory(conn, memory_id)
    if row is None:
        raise NotFound("Memory not found")
    version = expected_version()
    command = SaveMemory(row["name"], _kept(body, row, "content"), _kept(body, row, "description"),
                         _kept(body, row, "type"), Namespace(row["scope"], row["scope_id"]),
                         row["version"] if version is None else version)
    return written_memory(services().bus.handle(command, *writing("admin")))


def _kept(body: dict[str, Any], row: dict[str, Any], field: str) -> str:
    return str(row[field] if body[field] is None else body[field])


@blueprint.delete("/memories/<memory_id>")
@authorized("write", admin=True)
@idempotent(lambda position: deleted_by_id(outcome_at(position)))
def delete(memory_id: str) -> tuple[Response, int]:
    command = DeleteMemoryById(memory_id, expected_version=expected_version())
    return deleted_by_id(services().bus.handle(command, *writing("admin")))


@blueprint.get("/memories/<memory_id>/history")
@authorized("read", admin=True)
def history(memory_id: str) -> tuple[Response, int]:
    """Every write of one memory, from the log (deleted memories included)."""
    stream_id = stream_of(services().store, services().locator, memory_id)
    with services().database.snapshot():  # the stream and its supersedes as of one moment
        versions = memory_history(services().store, memory_id, stream_id) if stream_id else []
    if not versions:
        raise NotFound("Memory not found")
    return respond(MemoryHistorySchema(), {"memory_id": memory_id, "versions": [v.to_dict() for v in versions]})


@blueprint.post("/memories/<memory_id>/restore")
@authorized("write", admin=True)
@idempotent(lambda position: written_memory(outcome_at(position)))
def restore(memory_id: str) -> tuple[Response, int]:
    """A version of a memory back, as a new write (200; 201 when a deleted memory comes back)."""
    body = load(RestoreMemoryRequest(), json_object())
    return written_memory(services().bus.handle(RestoreMemory(memory_id, body["version"]), *writing("admin")))


@blueprint.get("/audit")
@authorized("read", admin=True)
def audit() -> tuple[Response, int]:
    args = load(AuditQuery(), request.args)
    if since := args.pop("since").strip():
        args["after"] = max(args["after"], services().store.position_at(_moment(since, "since")))
    with services().database.read() as conn:
        records = list_audit(conn, AuditFilter(**args))
    next_after = records[-1].position if records else args["after"]
    return respond(AuditPageSchema(), {"records": [record.to_dict() for record in records], "next_after": next_after})


@blueprint.get("/audit/chain")
@authorized("read", admin=True)
def chain() -> tuple[Response, int]:
    """One page of a walk of the hash chain, resumed from where the last one stopped (``after`` and the
    ``hash`` it reached there): ``memoryd audit verify`` in steps a page can show, none holding the server."""
    args = load(ChainPageQuery(), request.args)
    digest = args["hash"].strip().lower()
    if args["after"] > 0 and not re.fullmatch("[0-9a-f]{64}", digest):
        raise ValidationError("hash is required after position 0: the 64 hex digits the last page reached")
    start = Checkpoint(args["after"], digest if args["after"] > 0 else GENESIS)
    page = verify_page(services().store, start, args["limit"])
    verdict = page.verdict
    broken = {"position": verdict.broken.position, "reason": verdict.broken.reason} if verdict.broken else None
    return respond(ChainPageSchema(), {
        "events": verdict.events, "reached": {"position": verdict.head.position, "hash": verdict.head.hash},
        "head": {"position": page.head.position, "hash": page.head.hash}, "complete": page.complete,
        "broken": broken})


@blueprint.post("/erasures")
@authorized("write", admin=True)
@idempotent()
def erase() -> tuple[Response, int]:
    """Erase memories (a person's, one, a namespace's) from everything memoryd stores: 201 and a certificate;
    the same request again (nothing left to erase) runs the erasure's checks again: 200 and its certificate."""
    body = load(ErasureRequest(), json_object())
    certificate, erased_now = services().erasures.erase(_selector(body), body["reason"], *writing("admin"))
    return respond(ErasureCertificateSchema(), certificate, 201 if erased_now else 200)


@blueprint.get("/erasures/preview")
@authorized("read", admin=True)
def preview_erasure() -> tuple[Response, int]:
    """What an erasure with these selectors would take out now; nothing changes."""
    return respond(ErasurePreviewSchema(), services().erasures.preview(_selector(load(ErasurePreviewQuery(),
                                                                                       request.args))))


def _selector(args: dict[str, Any]) -> dict[str, str]:
    return {key: args[key] for key in ("user_id", "memory_id", "scope", "scope_id") if args[key] is not None}


@blueprint.get("/events")
@authorized("read", admin=True)
def events() -> tuple[Response, int]:
    """The log itself, from ``after`` on: a change feed for mirrors and warehouses, resumable by position."""
    args = load(EventsQuery(), request.args)
    store = services().store
    with services().database.snapshot(), services().database.read() as conn:  # the page and the head: one read
        head = store.head_position()
        page = store.read_after(conn, args["after"], args["limit"])
    next_after = page[-1].position if page else args["after"]
    return respond(EventPageSchema(), {"events": [dataclasses.asdict(event) for event in page],
                                       "next_after": next_after, "head": max(head, next_after)})


def _as_of(args: dict[str, Any]) -> int | None:
    """The log position ``as_of`` names (a position, or a time: the last position recorded by then); None
    without one."""
    text = args["as_of"].strip()
    if not text:
        return None
    head = services().store.head_position()
    if POSITION.fullmatch(text):
        if (position := int(text)) > head:
            raise ValidationError(f"as_of {position} is beyond the head of the log ({head})")
        return position
    return services().store.position_at(_moment(text, "as_of", "a log position or "))


def _moment(text: str, name: str, besides: str = "") -> dt.datetime:
    """``text`` as an aware UTC time, else a 400 naming ``name``."""
    try:
        moment = dt.datetime.fromisoformat(text)
        return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    except (ValueError, OverflowError):
        raise ValidationError(f"{name} must be {besides}an ISO 8601 time, like 2026-12-01T10:00:00Z "
                              "(a '+' in an offset is '%2B' in a query string)") from None


def _at(response: tuple[Response, int], position: int) -> tuple[Response, int]:
    response[0].headers["X-As-Of-Position"] = str(position)
    return response


def _filter(args: dict[str, Any]) -> MemoryFilter:
    scope, scope_id = args["scope"].strip(), args["scope_id"].strip()
    if scope_id and not scope:
        raise ValidationError("scope is required when scope_id is provided")
    if scope == "global" and scope_id:
        raise ValidationError("scope_id is not allowed with global scope")
    scopes = (ScopePattern(scope, scope_id or None),) if scope else None
    return MemoryFilter(type=args["type"], scopes=scopes)


def _clamp(value: int, bounds: tuple[int, int]) -> int:
    low, high = bounds
    return max(low, min(high, value))
