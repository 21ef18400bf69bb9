"""Who may address which namespace through the public REST API.

The public API knows three scopes. ``user`` always means the caller's own
user id; ``workstream`` needs a workstream the caller owns (a ``service``
token may address any); ``global`` takes no scope id. ``coordinator`` and
``project`` are written only through sessions, never here.
"""

from __future__ import annotations

from typing import Any

from memoryd.kernel.domain import PUBLIC_SCOPES, Namespace
from memoryd.kernel.errors import Forbidden, NotFound, ValidationError
from memoryd.kernel.text import checked_identifier
from memoryd.storage.directory import Directory, Principal
from projections.filters import MemoryFilter, ScopePattern


def public_namespace(caller: Principal, scope: Any, scope_id: Any, directory: Directory) -> Namespace:
    """Resolve and authorize an explicit public scope."""
    scope = checked_identifier(_text(scope).strip(), "scope").lower()
    scope_id = checked_identifier(_text(scope_id).strip(), "scope_id")
    if scope not in PUBLIC_SCOPES:
        raise ValidationError(f"invalid scope: {scope}; must be one of {sorted(PUBLIC_SCOPES)}")
    if scope == "global":
        if scope_id:
            raise ValidationError("scope_id is not allowed with global scope")
        return Namespace("global", "")
    if scope == "user":
        if not caller.user_id:
            raise ValidationError("User scope requires authentication with a user identity")
        if scope_id and scope_id != caller.user_id:
            raise Forbidden("Cannot access another user's memories")
        return Namespace("user", caller.user_id)
    if not scope_id:
        raise ValidationError("scope_id is required for workstream scope")
    workstream = directory.workstream(scope_id)
    if workstream is None:
        raise NotFound("Workstream not found")
    owner = workstream.owner_user_id
    if not caller.has_scope("service") and (not owner or owner != caller.user_id):
        raise Forbidden("Cannot access another user's workstream memories")
    return Namespace("workstream", scope_id)


def public_filter(caller: Principal, memory_type: str, scope: Any, scope_id: Any, directory: Directory) -> MemoryFilter:
    """What a public list or search sees: an explicit scope, or the envelope of global plus the caller's user scope."""
    if scope:
        namespace = public_namespace(caller, scope, scope_id, directory)
        pattern = ScopePattern("global") if namespace.scope == "global" else ScopePattern(namespace.scope,
                                                                                          namespace.scope_id)
        return MemoryFilter(type=memory_type, scopes=(pattern,))
    if scope_id:
        raise ValidationError("scope is required when scope_id is provided")
    return MemoryFilter(type=memory_type, scopes=(ScopePattern("global"), ScopePattern("user", caller.user_id)))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError("scope and scope_id must be strings")
    return value
