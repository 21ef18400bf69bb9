"""The directory: users and API tokens.

Tokens are kept only as hashes, scopes and permissions come from a closed
vocabulary, and each scope implies the weaker ones (read < write < service).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from memoryd.app.services import Services
from memoryd.kernel.errors import NotFound, ValidationError
from memoryd.storage.directory import Directory, Principal
from memoryd.storage.schema import tokens
from tests.helpers import MakeCaller


@pytest.fixture
def directory(services: Services) -> Directory:
    return services.directory


@pytest.fixture
def user(directory: Directory) -> str:
    return directory.create_user("alice")


def stored_tokens(services: Services) -> list[dict[str, Any]]:
    with services.database.read() as conn:
        return [dict(row._mapping) for row in conn.execute(select(tokens))]


def principal_of(directory: Directory, token: str) -> Principal:
    """The principal a token authenticates as (the test fails if it authenticates as nobody)."""
    principal = directory.authenticate(token)
    assert principal is not None
    return principal


@pytest.mark.parametrize("chosen", [None, "operator-chosen-secret-value"])
def test_the_tokens_table_never_holds_the_clear_token(services: Services, directory: Directory, user: str,
                                                      chosen: str | None) -> None:
    token_id, clear = directory.create_token(user, ["read", "write"], ["admin.memories"], value=chosen)
    if chosen:
        assert clear == chosen
    [row] = stored_tokens(services)
    assert row["token_id"] == token_id
    assert all(clear not in str(value) for value in row.values())
    assert all(clear[-16:] not in str(value) for value in row.values())
    assert principal_of(directory, clear).token_id == token_id


def test_two_tokens_are_different_secrets(directory: Directory, user: str) -> None:
    _, first = directory.create_token(user, ["read"], [])
    _, second = directory.create_token(user, ["read"], [])
    assert first != second
    assert len(first) >= 32


def test_authenticating_a_token_yields_its_user_scopes_and_permissions(directory: Directory, user: str) -> None:
    token_id, clear = directory.create_token(user, ["read", "write"], ["admin.memories"])
    assert directory.authenticate(clear) == Principal(
        user_id=user, token_id=token_id, scopes=frozenset({"read", "write"}), permissions=frozenset({"admin.memories"})
    )


@pytest.mark.parametrize("presented", ["", "mdt_unknown", "{token}x", "{token_without_last}", " {token}", "{token_upper}"])
def test_authenticate_returns_none_for_a_token_it_did_not_issue(directory: Directory, user: str, presented: str) -> None:
    _, clear = directory.create_token(user, ["service"], ["admin.memories"])
    value = presented.format(token=clear, token_without_last=clear[:-1], token_upper=clear.upper())
    assert directory.authenticate(value) is None


@pytest.mark.parametrize(
    ("scopes", "permissions", "mentions"),
    [
        (["admin"], [], "admin"),
        (["approve"], [], "approve"),
        (["read", "Write"], [], "Write"),
        ([], [], "none"),
        (["read"], ["admin.everything"], "admin.everything"),
        (["read"], ["memories"], "memories"),
    ],
)
def test_an_unknown_scope_or_permission_is_rejected_and_nothing_is_stored(services: Services, directory: Directory, user: str,
                                                                          scopes: list[Any],
                                                                          permissions: list[Any],
                                                                          mentions: str) -> None:
    with pytest.raises(ValidationError) as raised:
        directory.create_token(user, scopes, permissions)
    assert mentions in raised.value.message
    assert stored_tokens(services) == []


def test_a_token_for_an_unknown_user_is_refused(services: Services, directory: Directory) -> None:
    with pytest.raises(NotFound):
        directory.create_token("no-such-user", ["read"], [])
    assert stored_tokens(services) == []


@pytest.mark.parametrize(
    ("held", "allowed", "refused"),
    [
        ({"read"}, {"read"}, {"write", "service"}),
        ({"write"}, {"read", "write"}, {"service"}),
        ({"service"}, {"read", "write", "service"}, set()),
        ({"read", "write"}, {"read", "write"}, {"service"}),
    ],
)
def test_each_scope_implies_the_weaker_ones(directory: Directory, user: str, held: Any, allowed: Any, refused: Any) -> None:
    _, clear = directory.create_token(user, sorted(held), [])
    principal = principal_of(directory, clear)
    assert {scope for scope in ("read", "write", "service") if principal.has_scope(scope)} == allowed
    assert not any(principal.has_scope(scope) for scope in refused)


def test_a_permission_is_only_held_when_granted(directory: Directory, user: str) -> None:
    _, plain = directory.create_token(user, ["service"], [])
    _, granted = directory.create_token(user, ["read"], ["admin.memories"])
    assert not principal_of(directory, plain).has_permission("admin.memories")
    assert principal_of(directory, granted).has_permission("admin.memories")


@pytest.mark.parametrize(("scopes", "status"), [("read", 403), ("write", 201), ("service", 201)])
def test_the_scope_hierarchy_holds_over_http(make_caller: MakeCaller, scopes: str, status: int) -> None:
    caller = make_caller(scopes)
    assert caller.get("/v1/api/memories").status_code == 200
    assert caller.save("note").status_code == status
