"""Schemas of what the API answers, for the OpenAPI document and the routes that dump through them."""

from __future__ import annotations

from marshmallow import Schema, fields


class HistoricMemorySchema(Schema):
    """A memory as one write left it: its own fields (the log has no read counters)."""

    memory_id = fields.String()
    name = fields.String()
    description = fields.String()
    type = fields.String()
    scope = fields.String()
    scope_id = fields.String()
    content = fields.String()
    created = fields.String(metadata={"example": "2026-03-10T10:00:00"})
    updated = fields.String(metadata={"example": "2026-03-12T14:30:00"})


class MemorySchema(HistoricMemorySchema):
    """A memory as the read model holds it now: its fields, its reads and its version."""

    last_accessed = fields.String()
    access_count = fields.Integer()
    version = fields.Integer(metadata={"description": "how many writes the memory's name has had: its ETag, and "
                                                      "what If-Match and expected_version name"})


class MemoryListSchema(Schema):
    memories = fields.List(fields.Nested(MemorySchema))
    total = fields.Integer()


class MemoryPageSchema(MemoryListSchema):
    """A page of the public list; ``total`` counts the page's memories."""

    next_after = fields.String(allow_none=True, metadata={
        "description": "pass as `after` for the next page; null on the last page"})


class SearchHitSchema(MemorySchema):
    score = fields.Float(metadata={"description": "the BM25 score this search gave the memory: higher ranks first"})


class SearchListSchema(Schema):
    memories = fields.List(fields.Nested(SearchHitSchema))
    total = fields.Integer()


class DeletedSchema(Schema):
    status = fields.String(metadata={"example": "ok"})
    name = fields.String()


class StatusSchema(Schema):
    status = fields.String(metadata={"example": "ok"})


class ProjectMemberSchema(Schema):
    user_id = fields.String()
    access = fields.String(metadata={"description": "read or write"})


class ProjectSchema(Schema):
    project_id = fields.String()
    name = fields.String()
    owner = fields.String()
    state = fields.String(metadata={"description": "active or archived"})
    members = fields.List(fields.Nested(ProjectMemberSchema))
    created = fields.String()
    updated = fields.String()


class SessionSchema(Schema):
    session_id = fields.String()
    token = fields.String(metadata={"description": "shown once; acts only as this session"})
    kind = fields.String()
    user_id = fields.String(allow_none=True)
    workstream_id = fields.String()
    project_id = fields.String(allow_none=True)
    parent_session_id = fields.String(allow_none=True)


class PersonaSchema(Schema):
    memory = fields.Boolean()


class WorkstreamSchema(Schema):
    workstream_id = fields.String()
    name = fields.String()
    owner = fields.String(allow_none=True)
    project_id = fields.String(allow_none=True)
    persona = fields.Nested(PersonaSchema)


class ToolResultSchema(Schema):
    ok = fields.Boolean()
    error = fields.String(metadata={"description": "present when ok is false"})
    memory = fields.Nested(MemorySchema)
    memories = fields.List(fields.Nested(MemorySchema))
    text = fields.String(metadata={"description": "what the model reads"})


class DeletedProjectSchema(Schema):
    status = fields.String(metadata={"example": "ok"})
    project_id = fields.String()


class ErrorSchema(Schema):
    error = fields.String()


class RetryableErrorSchema(ErrorSchema):
    code = fields.String(metadata={"description": "set on answers to retry with the same request (and key) after "
                                                  "Retry-After: request_in_progress (409), database_unavailable (503)"})


class VersionMismatchSchema(ErrorSchema):
    current_version = fields.Integer(allow_none=True, metadata={"description": "the memory's version now; "
                                                                               "null: it does not exist"})


class AuditRecordSchema(Schema):
    position = fields.Integer()
    action = fields.String()
    actor = fields.String()
    memory_id = fields.String()
    name = fields.String()
    scope = fields.String()
    scope_id = fields.String()
    type = fields.String()
    surface = fields.String()
    client_ip = fields.String()
    request_id = fields.String()
    time = fields.String()
    session_id = fields.String()
    workstream_id = fields.String()
    project_id = fields.String()
    member = fields.String(metadata={"description": "project events: the user whose access changed"})
    access = fields.String(metadata={"description": "that user's access after the change ('' when revoked)"})
    user_id = fields.String(metadata={"description": "user, token and session events: the user concerned"})
    token_id = fields.String(metadata={"description": "token events: the token concerned (never its secret)"})
    reason = fields.String(metadata={"description": "identity events: the reason given, if any"})


class AuditPageSchema(Schema):
    records = fields.List(fields.Nested(AuditRecordSchema))
    next_after = fields.Integer(metadata={"description": "pass as `after` for the next page"})


class LoggedEventSchema(Schema):
    """An event exactly as the log stores it."""

    position = fields.Integer()
    stream_id = fields.String()
    stream_version = fields.Integer()
    event_type = fields.String(metadata={"example": "memory.save"})
    schema_version = fields.Integer()
    payload = fields.Dict()
    metadata = fields.Dict(metadata={"description": "who, through which surface, from where"})
    recorded_at = fields.String()
    payload_sha256 = fields.String(metadata={"description": "the payload's digest, which the chain commits to"})
    hash = fields.String(metadata={"description": "the hash chain at this position (docs/architecture.md)"})


class EventPageSchema(Schema):
    events = fields.List(fields.Nested(LoggedEventSchema), metadata={"description": "in position order"})
    next_after = fields.Integer(metadata={"description": "pass as `after` for the next page"})
    head = fields.Integer(metadata={"description": "the log's head when the page was read"})


class ErasureCheckSchema(Schema):
    store = fields.String(metadata={"example": "structured_memories"})
    free = fields.Boolean(metadata={"description": "nothing of the erased memories was found there"})
    detail = fields.String()


class ErasureCertificateSchema(Schema):
    position = fields.Integer(metadata={"description": "the memory.erase event's position in the log"})
    erased_at = fields.String()
    erased_by = fields.String(metadata={"description": "the acting user's id"})
    selector = fields.Dict(metadata={"description": "what was asked for: user_id, memory_id or scope + scope_id"})
    reason = fields.String()
    memories = fields.List(fields.String(), metadata={"description": "the erased memories' ids"})
    positions = fields.List(fields.Integer(), metadata={"description": "the log events whose payloads were redacted"})
    idempotency_keys_forgotten = fields.Integer()
    snapshots_dropped = fields.Integer()
    checks = fields.List(fields.Nested(ErasureCheckSchema), metadata={"description": "each store, read back"})
    free = fields.Boolean(metadata={"description": "every check found nothing of the erased memories"})


class ErasedMemorySchema(Schema):
    memory_id = fields.String()
    name = fields.String()
    scope = fields.String()
    scope_id = fields.String()
    type = fields.String()
    description = fields.String()


class ErasurePreviewSchema(Schema):
    selector = fields.Dict(metadata={"description": "what was asked for, as an erasure would take it"})
    memories = fields.List(fields.Nested(ErasedMemorySchema), metadata={
        "description": "the memories it would erase, each as its newest write left it (deleted ones too)"})
    positions = fields.List(fields.Integer(), metadata={"description": "the log events it would redact"})


class ChainPointSchema(Schema):
    position = fields.Integer()
    hash = fields.String()


class ChainBreakSchema(Schema):
    position = fields.Integer(metadata={"description": "the first position that does not hold"})
    reason = fields.String()


class ChainPageSchema(Schema):
    events = fields.Integer(metadata={"description": "events this page checked"})
    reached = fields.Nested(ChainPointSchema, metadata={
        "description": "verified up to here: the next page's `after` and `hash`"})
    head = fields.Nested(ChainPointSchema, metadata={"description": "the log's head when this page was read"})
    complete = fields.Boolean(metadata={"description": "the walk reached the head and it verified"})
    broken = fields.Nested(ChainBreakSchema, allow_none=True, metadata={
        "description": "where the chain stops holding; null when it holds"})


class MemoryVersionSchema(Schema):
    version = fields.Integer(metadata={"description": "the memory's version after this write (its ETag then)"})
    position = fields.Integer()
    event_type = fields.String(metadata={"example": "memory.update"})
    time = fields.String()
    actor = fields.String(metadata={"description": "the acting user's id"})
    surface = fields.String(metadata={"description": "rest, admin, console, tool or cli"})
    memory = fields.Nested(HistoricMemorySchema, metadata={"description": "as the write left it; a delete: as it was"})
    superseded = fields.Boolean(metadata={"description": "an operator replaced the event; memory is the replacement"})


class MemoryHistorySchema(Schema):
    memory_id = fields.String()
    versions = fields.List(fields.Nested(MemoryVersionSchema), metadata={"description": "oldest first"})
