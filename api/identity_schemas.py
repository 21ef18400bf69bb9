"""Marshmallow schemas of the identity routes: users, tokens, sessions, and the project and workstream lists.

A token is never dumped with its value or hash, except the one answer that creates it (``token``, once).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from api.answer_schemas import ProjectSchema, WorkstreamSchema
from api.schemas import RequestSchema, WholeNumber, _limit, _text


def _after() -> fields.String:
    return _text("after", load_default="", metadata={"description": "the previous page's next_after ('' first)"})


def _state(*choices: str) -> fields.String:
    return _text("state", load_default="", validate=validate.OneOf(["", *choices],
                                                                   error="state must be one of {choices}"))


class ReasonRequest(RequestSchema):
    reason = _text("reason", load_default="", metadata={"description": "why (in the audit trail); optional"})


class CreateUserRequest(RequestSchema):
    name = _text("name", "name is required", metadata={"description": "unique; a name taken is a 409"})


class CreateTokenRequest(RequestSchema):
    user_id = _text("user_id", "user_id is required")
    scopes = fields.List(fields.String(), required=True,
                         error_messages={"required": "scopes is required (some of read, write, service)",
                                         "invalid": "scopes must be a list of strings"},
                         metadata={"description": "some of read, write (implies read), service (implies write)"})
    permissions = fields.List(fields.String(), load_default=list,
                              error_messages={"invalid": "permissions must be a list of strings"},
                              metadata={"description": "e.g. [\"admin.memories\"]"})
    permission = _text("permission", load_default=None, allow_none=True,
                       metadata={"description": "one permission (the same as permissions: [it])"})
    name = _text("name", load_default="", metadata={"description": "what the token is for"})
    expires_at = _text("expires_at", load_default=None, allow_none=True,
                       metadata={"description": "ISO 8601 time; not with expires_in_days"})
    expires_in_days = WholeNumber(load_default=None, allow_none=True,
                                  validate=validate.Range(1, 36_500, error="expires_in_days must be 1 to 36500"),
                                  error_messages={"invalid": "expires_in_days must be an integer"},
                                  metadata={"description": "default: [auth] default_token_days (0: never)"})


class UsersQuery(RequestSchema):
    state = _state("active", "deactivated")
    name = _text("name", load_default="")
    after = _after()
    limit = _limit(100, 1, 1000)


class TokensQuery(RequestSchema):
    user_id = _text("user_id", load_default="")
    state = _state("active", "revoked", "expired")
    after = _after()
    limit = _limit(100, 1, 1000)


class SessionsQuery(RequestSchema):
    user_id = _text("user_id", load_default="")
    workstream_id = _text("workstream_id", load_default="")
    state = _state("open", "closed")
    after = _after()
    limit = _limit(100, 1, 1000)


class ProjectsQuery(RequestSchema):
    owner = _text("owner", load_default="")
    member = _text("member", load_default="")
    state = _state("active", "archived")
    after = _after()
    limit = _limit(100, 1, 1000)


class WorkstreamsQuery(RequestSchema):
    owner = _text("owner", load_default="")
    member = _text("member", load_default="", metadata={"description": "attached to a project this user is in"})
    project_id = _text("project_id", load_default="")
    after = _after()
    limit = _limit(100, 1, 1000)


class UserSchema(Schema):
    user_id = fields.String()
    name = fields.String()
    created = fields.String()
    active = fields.Boolean()
    deactivated_at = fields.String(allow_none=True)


class TokenSchema(Schema):
    token_id = fields.String()
    prefix = fields.String(metadata={"description": "mdt_ and 4 characters, to tell tokens apart ('' if unknown)"})
    name = fields.String()
    user_id = fields.String()
    scopes = fields.List(fields.String())
    permissions = fields.List(fields.String())
    created = fields.String()
    expires_at = fields.String(allow_none=True)
    last_used_at = fields.String(allow_none=True, metadata={"description": "to about a minute"})
    revoked_at = fields.String(allow_none=True)


class CreatedTokenSchema(TokenSchema):
    token = fields.String(metadata={"description": "the secret: shown only in this answer"})


class SessionRecordSchema(Schema):
    session_id = fields.String()
    kind = fields.String()
    user_id = fields.String(allow_none=True)
    workstream_id = fields.String()
    parent_session_id = fields.String(allow_none=True)
    created = fields.String()
    state = fields.String(metadata={"description": "open or closed"})
    closed_at = fields.String(allow_none=True)
    last_active_at = fields.String(allow_none=True, metadata={"description": "to about a minute"})


class ClosedSessionsSchema(Schema):
    closed = fields.List(fields.Nested(SessionRecordSchema),
                         metadata={"description": "closed by this request: the session, then its children"})


def _page(item: type[Schema], name: str) -> type[Schema]:
    return Schema.from_dict({name: fields.List(fields.Nested(item)),
                             "next_after": fields.String(metadata={"description": "pass as `after` for the next page"})},
                            name=f"{item.__name__.removesuffix('Schema')}PageSchema")


UserPageSchema = _page(UserSchema, "users")
TokenPageSchema = _page(TokenSchema, "tokens")
SessionPageSchema = _page(SessionRecordSchema, "sessions")
ProjectPageSchema = _page(ProjectSchema, "projects")
WorkstreamPageSchema = _page(WorkstreamSchema, "workstreams")
