"""The OpenAPI 3 document, generated from the same marshmallow schemas that validate."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema

from api import answer_schemas, batch_schemas, schemas, turn_schemas
from api import identity_schemas as ids

_ERRORS = {
    "400": "Invalid input",
    "401": "Missing or invalid token; a known one refused says why in `reason` (token revoked, token expired, "
           "user deactivated, session closed)",
    "403": "Token lacks the scope, permission or ownership needed",
    "404": "Not found",
    "405": "Method not allowed on this path",
    "409": "Idempotency-Key reused for another request; a concurrent write won; a user name taken. With `code` "
           "`request_in_progress` and Retry-After: the key's first attempt is still running (retry with the same key)",
    "413": "Request body too large",
    "500": "Storage failure",
    "503": "The read model has not reached X-Min-Position, or a projection is stopped; with `code` "
           "`database_unavailable` and Retry-After: the database cannot be reached just now (retry)",
}
_RETRYABLE = {"409", "503"}  # their answers may carry a ``code`` saying: the same request later
_IDEMPOTENCY_KEY = {"in": "header", "name": "Idempotency-Key", "required": False,
                    "description": "1 to 255 printable ASCII characters; a retry with it replays the first answer",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255}}
_IF_MATCH = {"in": "header", "name": "If-Match", "required": False,
             "description": 'write only if the memory is at this version: one ETag as memoryd gives it ("3")',
             "schema": {"type": "string", "pattern": '^"[0-9]{1,18}"$'}}
_MIN_POSITION = {"in": "header", "name": "X-Min-Position", "required": False,
                 "description": "wait (bounded) until the read model has reached this log position",
                 "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"}}


def _operation(summary: str, ok: type[Schema], *, query: type[Schema] | None = None, body: type[Schema] | None = None,
               path: tuple[str, ...] = (), created: bool = False, idempotent: bool = False,
               waits: bool = False, conditional: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "security": [{"bearer": []}],
        "parameters": [{"in": "path", "name": name, "required": True, "schema": {"type": "string"}} for name in path],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ok}}}},
    }
    if idempotent:
        operation["parameters"].append(_IDEMPOTENCY_KEY)
    if waits:
        operation["parameters"].append(_MIN_POSITION)
    if conditional:
        operation["parameters"].append(_IF_MATCH)
    if query is not None:
        operation["parameters"].append({"in": "query", "schema": query})
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if created:
        operation["responses"]["201"] = {"description": "Created", "content": {"application/json": {"schema": ok}}}
    for status, description in _ERRORS.items():
        schema = "RetryableError" if status in _RETRYABLE else "Error"
        operation["responses"][status] = {"description": description, "content": {"application/json": {"schema": schema}}}
    if conditional:
        operation["responses"]["412"] = {"description": "If-Match names another version: nothing was written",
                                         "content": {"application/json": {"schema": "VersionMismatch"}}}
    return operation


def build_openapi() -> dict[str, Any]:
    spec = APISpec(title="memoryd", version=_version(), openapi_version="3.0.3", plugins=[MarshmallowPlugin()])
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.schema("Error", schema=answer_schemas.ErrorSchema)
    spec.components.schema("RetryableError", schema=answer_schemas.RetryableErrorSchema)
    spec.components.schema("VersionMismatch", schema=answer_schemas.VersionMismatchSchema)
    spec.path("/v1/api/memories", operations={
        "get": _operation("List memories (global plus your user scope, or one scope), newest first, a page at a time: "
                          "pass next_after as after", answer_schemas.MemoryPageSchema,
                          query=schemas.ListMemoriesQuery, waits=True),
        "post": _operation("Save or upsert a memory (201 created, 200 updated)", answer_schemas.MemorySchema,
                           body=schemas.SaveMemoryRequest, created=True, idempotent=True, conditional=True),
    })
    spec.path("/v1/api/memories/search", operations={
        "post": _operation("Search memories by BM25 relevance (each hit with its score); offset pages deeper",
                           answer_schemas.SearchListSchema,
                           body=schemas.SearchMemoriesRequest, waits=True),
    })
    spec.path("/v1/api/memories/batch", operations={
        "post": _operation("Save and delete memories in order, all or none: one transaction, one append (a refusal "
                           "names the write, as writes[2])", batch_schemas.WriteMemoriesSchema,
                           body=batch_schemas.WriteMemoriesRequest, idempotent=True),
    })
    spec.path("/v1/api/memories/{name}", operations={
        "get": _operation("Get a memory by name and scope (global by default)", answer_schemas.MemorySchema,
                          query=schemas.NamedMemoryQuery, path=("name",), waits=True),
        "delete": _operation("Delete a memory by name and scope", answer_schemas.DeletedSchema, query=schemas.NamedMemoryQuery,
                             path=("name",), idempotent=True, conditional=True),
    })
    spec.path("/v1/api/admin/memories", operations={
        "get": _operation("List memories across every scope", answer_schemas.MemoryListSchema, query=schemas.AdminListQuery,
                          waits=True),
    })
    spec.path("/v1/api/admin/memories/search", operations={
        "get": _operation("Search memories across every scope", answer_schemas.SearchListSchema, query=schemas.AdminSearchQuery,
                          waits=True),
    })
    spec.path("/v1/api/admin/memories/{memory_id}", operations={
        "get": _operation("Get one memory by id (with as_of: as it was then)", answer_schemas.MemorySchema,
                          query=schemas.AsOfQuery, path=("memory_id",), waits=True),
        "patch": _operation("Edit one memory by id, in whichever scope it is: the content, description or type "
                            "given (the rest kept), at the If-Match version or the one read", answer_schemas.MemorySchema,
                            body=schemas.EditMemoryRequest, path=("memory_id",), idempotent=True, conditional=True),
        "delete": _operation("Delete one memory by id", answer_schemas.StatusSchema, path=("memory_id",), idempotent=True,
                             conditional=True),
    })
    spec.path("/v1/api/admin/memories/{memory_id}/history", operations={
        "get": _operation("Every write of one memory, from the log, oldest first (deleted memories too)",
                          answer_schemas.MemoryHistorySchema, path=("memory_id",)),
    })
    spec.path("/v1/api/admin/memories/{memory_id}/restore", operations={
        "post": _operation("Bring a version of a memory back, as a new write audited like any save (201: a deleted "
                           "memory came back)", answer_schemas.MemorySchema, body=schemas.RestoreMemoryRequest,
                           path=("memory_id",), created=True, idempotent=True),
    })
    spec.path("/v1/api/admin/audit", operations={
        "get": _operation("Audit records of saves, updates and deletes, from the log", answer_schemas.AuditPageSchema,
                          query=schemas.AuditQuery),
    })
    spec.path("/v1/api/admin/audit/chain", operations={
        "get": _operation("Verify one page of the hash chain, resumed from `after` and the `hash` reached there "
                          "(`memoryd audit verify` in steps, with progress)", answer_schemas.ChainPageSchema,
                          query=schemas.ChainPageQuery),
    })
    spec.path("/v1/api/admin/erasures", operations={
        "post": _operation("Erase memories (a user's, one memory, or a namespace's) from the log and every read "
                           "model; the certificate lists what was erased and each store read back",
                           answer_schemas.ErasureCertificateSchema, body=schemas.ErasureRequest, created=True,
                           idempotent=True),
    })
    spec.path("/v1/api/admin/erasures/preview", operations={
        "get": _operation("What an erasure with these selectors would erase now (the memories and the log "
                          "positions), changing nothing", answer_schemas.ErasurePreviewSchema,
                          query=schemas.ErasurePreviewQuery),
    })
    spec.path("/v1/api/admin/events", operations={
        "get": _operation("The event log itself, in position order from `after` (a change feed, resumable by position)",
                          answer_schemas.EventPageSchema, query=schemas.EventsQuery),
    })
    spec.path("/v1/api/admin/projects", operations={
        "get": _operation("List projects (filters: owner, member, state; paged by id)", ids.ProjectPageSchema,
                          query=ids.ProjectsQuery),
        "post": _operation("Create a project (201)", answer_schemas.ProjectSchema, body=schemas.CreateProjectRequest,
                           created=True, idempotent=True),
    })
    spec.path("/v1/api/admin/projects/{project_id}", operations={
        "get": _operation("Get a project", answer_schemas.ProjectSchema, path=("project_id",)),
        "delete": _operation("Delete a project and every memory in its scope", answer_schemas.DeletedProjectSchema,
                             path=("project_id",), idempotent=True),
    })
    spec.path("/v1/api/admin/projects/{project_id}/members/{user_id}", operations={
        "put": _operation("Grant or change a member's access", answer_schemas.ProjectSchema, body=schemas.GrantAccessRequest,
                          path=("project_id", "user_id")),
        "delete": _operation("Revoke a member's access", answer_schemas.ProjectSchema, path=("project_id", "user_id"),
                             idempotent=True),
    })
    for action in ("archive", "reactivate"):
        spec.path(f"/v1/api/admin/projects/{{project_id}}/{action}", operations={
            "post": _operation(f"{action.capitalize()} a project", answer_schemas.ProjectSchema, path=("project_id",),
                               idempotent=True),
        })
    spec.path("/v1/api/sessions", operations={
        "post": _operation("Open an agent session (service token or admin); returns its token", answer_schemas.SessionSchema,
                           body=schemas.CreateSessionRequest, created=True, idempotent=True),
    })
    spec.path("/v1/api/session", operations={
        "get": _operation("The session this session token acts as", answer_schemas.SessionSchema),
    })
    spec.path("/v1/api/sessions/{session_id}/memory", operations={
        "post": _operation("Run one memory tool call with the session's own token", answer_schemas.ToolResultSchema,
                           body=schemas.ToolCallSchema, path=("session_id",), idempotent=True),
    })
    spec.path("/v1/api/sessions/{session_id}/turns", operations={
        "post": _operation("Compose this turn: the memories to inject, the hint and the nudges, with a receipt",
                           turn_schemas.TurnSchema, body=turn_schemas.TurnRequestSchema, path=("session_id",),
                           idempotent=True, waits=True),
    })
    spec.path("/v1/api/sessions/{session_id}/turns/{turn_id}", operations={
        "get": _operation("A turn's receipt, its block rebuilt from the log", turn_schemas.ReceiptSchema,
                          path=("session_id", "turn_id")),
    })
    spec.path("/v1/api/sessions/{session_id}/signals", operations={
        "post": _operation("The nudges a tool-loop event earns (resume, tool_results)", turn_schemas.SignalAnswerSchema,
                           body=turn_schemas.SignalRequestSchema, path=("session_id",)),
    })
    spec.path("/v1/api/admin/sessions/{session_id}/turns", operations={
        "get": _operation("A session's turn receipts, in turn order", turn_schemas.ReceiptPageSchema,
                          query=schemas.ReceiptsQuery, path=("session_id",)),
    })
    spec.path("/v1/api/admin/memories/{memory_id}/turns", operations={
        "get": _operation("The newest turns, in any session, that put this memory in front of the model",
                          turn_schemas.ReceiptListSchema, query=schemas.MemoryTurnsQuery, path=("memory_id",)),
    })
    spec.path("/v1/api/admin/workstreams", operations={
        "get": _operation("List workstreams (filters: owner, member, project_id; paged by id)",
                          ids.WorkstreamPageSchema, query=ids.WorkstreamsQuery),
        "post": _operation("Create a workstream", answer_schemas.WorkstreamSchema, body=schemas.CreateWorkstreamRequest,
                           created=True, idempotent=True),
    })
    spec.path("/v1/api/admin/workstreams/{workstream_id}", operations={
        "patch": _operation("Attach or detach a project, or change the persona's memory lever",
                            answer_schemas.WorkstreamSchema, body=schemas.WorkstreamChangeRequest, path=("workstream_id",)),
    })
    _identities(spec)
    return spec.to_dict()


def _identities(spec: APISpec) -> None:
    """Users, tokens and sessions (docs/identities.md); every change is in the audit trail."""
    spec.path("/v1/api/admin/users", operations={
        "get": _operation("List users (filters: state, name; paged by id)", ids.UserPageSchema, query=ids.UsersQuery),
        "post": _operation("Create a user (a name taken is a 409)", ids.UserSchema, body=ids.CreateUserRequest,
                           created=True),
    })
    spec.path("/v1/api/admin/users/{user_id}", operations={
        "get": _operation("Get a user", ids.UserSchema, path=("user_id",)),
    })
    for action, effect in (("deactivate", "its tokens and sessions are refused at once"),
                           ("reactivate", "its tokens and sessions work again")):
        spec.path(f"/v1/api/admin/users/{{user_id}}/{action}", operations={
            "post": _operation(f"{action.capitalize()} a user: {effect} (optional reason)", ids.UserSchema,
                               body=ids.ReasonRequest, path=("user_id",)),
        })
    spec.path("/v1/api/admin/tokens", operations={
        "get": _operation("List tokens (never their secret): filters user_id, state; paged by id",
                          ids.TokenPageSchema, query=ids.TokensQuery),
        "post": _operation("Create a token; the answer holds its secret, the only time it is shown",
                           ids.CreatedTokenSchema, body=ids.CreateTokenRequest, created=True),
    })
    spec.path("/v1/api/admin/tokens/{token_id}", operations={
        "delete": _operation("Revoke a token: its next request, to any API process, is a 401 (optional reason)",
                             ids.TokenSchema, body=ids.ReasonRequest, path=("token_id",)),
    })
    spec.path("/v1/api/token", operations={
        "get": _operation("The caller's own token (the fields a list shows)", ids.TokenSchema),
    })
    spec.path("/v1/api/admin/sessions", operations={
        "get": _operation("List sessions (filters: user_id, workstream_id, state; paged by id)", ids.SessionPageSchema,
                          query=ids.SessionsQuery),
    })
    spec.path("/v1/api/sessions/{session_id}", operations={
        "delete": _operation("Close a session and a coordinator's children (its own token or an admin)",
                             ids.ClosedSessionsSchema, body=ids.ReasonRequest, path=("session_id",)),
    })


def _version() -> str:
    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "0.0.0"
