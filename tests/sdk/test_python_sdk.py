"""The Python SDK against the real application (in process through httpx's WSGI transport, or a live server).

Unit behaviour a user relies on: the reference signatures, models read by key
or attribute, error types and messages, retries that never apply a write twice,
read-your-writes positions, and a turn that fails open within its timeout.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask
from memoryd_sdk import (
    APIConnectionError,
    AsyncMemorydConsole,
    AsyncMemorydServer,
    AsyncSession,
    BadRequestError,
    ConflictError,
    DatabaseUnavailableError,
    MemorydAPIError,
    MemorydConsole,
    MemorydServer,
    NotFoundError,
    PermissionDeniedError,
    RequestInProgressError,
    Session,
)
from memoryd_sdk.compat import turnstone

from api.app import create_app
from api.openapi import build_openapi
from memoryd.app.services import Services
from tests.helpers import LiveServer, free_port, spawn_worker, stop

SDK = Path(__file__).resolve().parents[2] / "sdk" / "python"
EMPTY = inspect.Parameter.empty
KW, POS = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD

# The reference SDK's memory surface (turnstone 1.8.x): name -> [(parameter, kind, default)]
REFERENCE: dict[tuple[str, str], list[tuple[str, Any, Any]]] = {
    ("server", "list_memories"): [("mem_type", KW, ""), ("scope", KW, ""), ("scope_id", KW, ""), ("limit", KW, 100)],
    ("server", "save_memory"): [("name", POS, EMPTY), ("content", POS, EMPTY), ("description", KW, EMPTY),
                                ("mem_type", KW, "general"), ("scope", KW, "global"), ("scope_id", KW, "")],
    ("server", "search_memories"): [("query", POS, EMPTY), ("mem_type", KW, ""), ("scope", KW, ""),
                                    ("scope_id", KW, ""), ("limit", KW, 20)],
    ("server", "get_memory"): [("name", POS, EMPTY), ("scope", KW, "global"), ("scope_id", KW, "")],
    ("server", "delete_memory"): [("name", POS, EMPTY), ("scope", KW, "global"), ("scope_id", KW, "")],
    ("console", "list_memories"): [("mem_type", KW, ""), ("scope", KW, ""), ("scope_id", KW, ""), ("limit", KW, 100)],
    ("console", "search_memories"): [("query", POS, EMPTY), ("mem_type", KW, ""), ("scope", KW, ""),
                                     ("scope_id", KW, ""), ("limit", KW, 20)],
    ("console", "get_memory"): [("memory_id", POS, EMPTY)],
    ("console", "delete_memory"): [("memory_id", POS, EMPTY)],
}
# What memoryd adds to them, after the reference's own and keyword-only, so reference calls run unchanged
EXTENSIONS: dict[tuple[str, str], list[tuple[str, Any, Any]]] = {
    ("server", "list_memories"): [("after", KW, "")],
    ("server", "search_memories"): [("offset", KW, 0)],
    ("console", "list_memories"): [("as_of", KW, None), ("offset", KW, 0)],
    ("console", "search_memories"): [("as_of", KW, None)],
    ("console", "get_memory"): [("as_of", KW, None)],
}
CONSTRUCTOR = [("base_url", POS, "http://localhost:8080"), ("token", POS, ""), ("timeout", POS, 30.0),
               ("httpx_client", POS, None), ("ca_cert", POS, None), ("client_cert", POS, None),
               ("client_key", POS, None), ("token_factory", POS, None)]


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values() if p.name != "self"]


@pytest.mark.parametrize(("family", "method"), list(REFERENCE))
def test_the_memory_methods_keep_the_reference_signatures_sync_and_async(family: Any, method: Any) -> None:
    classes = (MemorydServer, AsyncMemorydServer) if family == "server" else (MemorydConsole, AsyncMemorydConsole)
    for cls in classes:
        expected = REFERENCE[(family, method)] + EXTENSIONS.get((family, method), [])
        assert parameters(getattr(cls, method)) == expected, (cls.__name__, method)
    assert inspect.iscoroutinefunction(getattr(classes[1], method))


def test_the_constructors_take_the_reference_arguments_first() -> None:
    for cls in (MemorydServer, AsyncMemorydServer, MemorydConsole, AsyncMemorydConsole):
        assert parameters(cls.__init__)[:len(CONSTRUCTOR)] == CONSTRUCTOR, cls.__name__


def test_the_async_clients_are_the_sync_ones_generated_and_the_turnstone_names_are_bound() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_async", SDK / "tools" / "make_async.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    written = (SDK / "memoryd_sdk" / "_async.py").read_text()
    assert generator.generate((SDK / "memoryd_sdk" / "_sync.py").read_text()) == written, \
        "memoryd_sdk/_async.py is stale: run sdk/python/tools/make_async.py"
    for sync, asynchronous in ((MemorydServer, AsyncMemorydServer), (MemorydConsole, AsyncMemorydConsole),
                               (Session, AsyncSession)):
        public = {name for name in dir(sync) if not name.startswith("_")}
        assert public - {"close"} == {name for name in dir(asynchronous) if not name.startswith("_")} - {"aclose"}
        for name in public - {"close", "session"}:
            assert parameters(getattr(sync, name)) == parameters(getattr(asynchronous, name)), name
    assert turnstone.TurnstoneServer is MemorydServer and turnstone.AsyncTurnstoneConsole is AsyncMemorydConsole
    assert turnstone.TurnstoneAPIError is MemorydAPIError


# -- against the application, in process ----------------------------------------------------


@pytest.fixture
def app(services: Services) -> Flask:
    return create_app(services)


@pytest.fixture
def tokens(services: Services) -> dict[str, str]:
    directory = services.directory
    user, admin = directory.create_user("alice"), directory.create_user("admin")
    return {"user": directory.create_token(user, ["read", "write"], [])[1], "user_id": user,
            "admin": directory.create_token(admin, ["read", "write", "service"], ["admin.memories"])[1]}


def wsgi_client(app: Flask, **options: Any) -> httpx.Client:
    return httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://memoryd", **options)


def test_memories_round_trip_with_models_read_by_key_or_attribute(app: Flask, tokens: dict[str, str]) -> None:
    with MemorydServer("http://memoryd", token=tokens["user"], httpx_client=wsgi_client(app)) as server:
        saved = server.save_memory("Deploy Steps", "we deploy with buildkite", description="  how   we deploy ")
        assert saved.name == saved["name"] == "deploy_steps" and saved.description == "how we deploy"
        assert saved.position and saved["scope"] == "global"
        assert [m["name"] for m in server.search_memories("buildkite")] == ["deploy_steps"]
        assert server.list_memories().total == 1 and server.get_memory("deploy-steps").content.startswith("we")
        kept = server.save_memory("deploy_steps", "now with argo", description="how we deploy", mem_type=None)
        assert kept.type == "general" and kept.memory_id == saved.memory_id
        assert server.delete_memory("deploy_steps").status == "ok"
        with pytest.raises(NotFoundError) as missing:
            server.get_memory("deploy_steps")
        assert str(missing.value) == "HTTP 404: Memory 'deploy_steps' not found" and missing.value.status_code == 404
        with pytest.raises(ValueError, match="description is required"):
            server.save_memory("x", "y", description="   ")
        with pytest.raises(BadRequestError):
            server.save_memory("x", "y", description="d", scope="galaxy")
        with pytest.raises(PermissionDeniedError):
            server.save_memory("x", "y", description="d", scope="user", scope_id="someone-else")


def test_names_are_percent_encoded(app: Flask, tokens: dict[str, str]) -> None:
    with MemorydServer("http://memoryd", token=tokens["user"], httpx_client=wsgi_client(app)) as server:
        with pytest.raises(NotFoundError, match="a/b_c"):
            server.get_memory("a/b c")


class DropsTheFirstAnswer(httpx.BaseTransport):
    """Lets the first request reach the server (it commits), then loses the answer, as a dropped connection would."""

    def __init__(self, app: Flask) -> None:
        self.inner, self.dropped = httpx.WSGITransport(app=app), False
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("Idempotency-Key"))
        response = self.inner.handle_request(request)
        if not self.dropped:
            self.dropped = True
            raise httpx.ReadError("connection reset after the server answered")
        return response


def test_a_write_retried_after_a_lost_answer_happens_exactly_once(app: Flask, tokens: dict[str, str], services: Services,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memoryd_sdk._transport.BACKOFF", 0.0)
    transport = DropsTheFirstAnswer(app)
    client = httpx.Client(transport=transport, base_url="http://memoryd")
    with MemorydServer("http://memoryd", token=tokens["user"], httpx_client=client, max_retries=1) as server:
        saved = server.save_memory("once", "exactly once", description="d")
    assert saved.name == "once" and len(transport.keys) == 2 and transport.keys[0] == transport.keys[1] is not None
    assert [event.event_type for event in services.store.iter_all()] == ["memory.save"]


def test_retries_honour_retry_after_and_stop_on_a_client_error() -> None:
    answers = [httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": "0"}),
               httpx.Response(200, json={"memories": [], "total": 0})]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0) if answers else httpx.Response(400, json={"error": "limit must be an integer"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    with MemorydServer("http://memoryd", token="t", httpx_client=client) as server:
        assert server.list_memories().total == 0 and len(seen) == 2
        with pytest.raises(BadRequestError, match="HTTP 400: limit must be an integer"):
            server.list_memories()
    assert len(seen) == 3  # a 400 is not retried


MEMORY = {"memory_id": "m", "name": "n", "content": "c", "created": "t", "updated": "t"}
Answer = tuple[int, dict[str, Any], dict[str, str]]
IN_PROGRESS: Answer = (409, {"error": "still running", "code": "request_in_progress"}, {"Retry-After": "0"})
DATABASE_DOWN: Answer = (503, {"error": "the database is unavailable", "code": "database_unavailable"},
                         {"Retry-After": "0"})
SAVED: Answer = (201, MEMORY, {})
LISTED: Answer = (200, {"memories": [], "total": 0}, {})


def answering(*answers: Answer) -> tuple[list[httpx.Request], httpx.MockTransport]:
    """A transport giving ``answers`` in turn (the last one again and again), and the requests it saw."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body, headers = answers[min(len(seen), len(answers)) - 1]
        return httpx.Response(status, json=body, headers=headers)

    return seen, httpx.MockTransport(handler)


def test_a_write_whose_key_is_still_in_use_is_retried_with_that_key_until_it_answers() -> None:
    seen, transport = answering(IN_PROGRESS, IN_PROGRESS, IN_PROGRESS, SAVED)
    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=transport)) as server:
        assert server.save_memory("n", "c", description="d").name == "n"
    assert len(seen) == 4 and len({request.headers["Idempotency-Key"] for request in seen}) == 1


def test_only_a_real_conflict_is_a_conflict_error() -> None:
    seen, transport = answering((409, {"error": "key reused for another request"}, {}))
    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=transport)) as server:
        with pytest.raises(ConflictError):
            server.save_memory("n", "c", description="d")
    assert len(seen) == 1
    _, transport = answering(IN_PROGRESS)
    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=transport),
                       retry_deadline=0) as server:
        with pytest.raises(RequestInProgressError) as raised:
            server.save_memory("n", "c", description="d")
    assert not isinstance(raised.value, ConflictError) and raised.value.code == "request_in_progress"


def test_an_unavailable_database_is_retried_past_max_retries_within_the_deadline() -> None:
    seen, transport = answering(*[DATABASE_DOWN] * 5, LISTED)
    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=transport)) as server:
        assert server.list_memories().total == 0
    assert len(seen) == 6
    seen, transport = answering(DATABASE_DOWN)
    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=transport),
                       retry_deadline=0) as server:
        with pytest.raises(DatabaseUnavailableError, match="HTTP 503: the database is unavailable"):
            server.list_memories()
    assert len(seen) == 1


def test_the_async_client_retries_a_key_in_use_and_an_unavailable_database_alike() -> None:
    import asyncio

    seen, transport = answering(DATABASE_DOWN, IN_PROGRESS, DATABASE_DOWN, SAVED)

    async def save() -> Any:
        async with AsyncMemorydServer("http://memoryd", token="t",
                                      httpx_client=httpx.AsyncClient(transport=transport)) as server:
            return await server.save_memory("n", "c", description="d")

    assert asyncio.run(save()).name == "n"
    assert len(seen) == 4 and len({request.headers["Idempotency-Key"] for request in seen}) == 1


def test_reads_after_a_write_carry_its_position_as_x_min_position() -> None:
    seen: list[httpx.Request] = []
    memory = {"memory_id": "m", "name": "n", "content": "c", "created": "t", "updated": "t"}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "POST" and request.url.path == "/v1/api/memories":
            return httpx.Response(201, json=memory, headers={"X-Memory-Position": "42"})
        return httpx.Response(200, json={"memories": [], "total": 0})

    for read_your_writes, expected in ((True, "42"), (False, None)):
        seen.clear()
        client = httpx.Client(transport=httpx.MockTransport(handler))
        with MemorydServer("http://memoryd", token="t", httpx_client=client, read_your_writes=read_your_writes) as s:
            assert s.list_memories() is not None and "X-Min-Position" not in seen[-1].headers
            assert s.save_memory("n", "c", description="d").position == 42
            s.search_memories("c")
            assert seen[-1].headers.get("X-Min-Position") == expected


def test_the_console_reads_send_as_of_only_when_given() -> None:
    import asyncio
    import datetime as dt

    seen: list[httpx.Request] = []
    memory = {"memory_id": "m", "name": "n", "content": "c", "created": "t", "updated": "t", "version": 1}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/m"):
            return httpx.Response(200, json=memory, headers={"X-As-Of-Position": "42"})
        return httpx.Response(200, json={"memories": [memory], "total": 1})

    moment = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC)
    with MemorydConsole("http://memoryd", token="t", httpx_client=httpx.Client(transport=httpx.MockTransport(handler))) \
            as console:
        assert console.get_memory("m", as_of=42).version == 1
        console.list_memories(scope="global", as_of="2026-12-01T10:00:00Z")
        console.search_memories("c", as_of=moment)
        console.get_memory("m", as_of=0)
        console.list_memories()
        console.search_memories("c", as_of="")
        console.get_memory("m")
        with pytest.raises(ValueError, match="timezone-aware"):
            console.get_memory("m", as_of=dt.datetime(2026, 12, 1, 10, 0))
        with pytest.raises(TypeError, match="as_of must be"):
            console.list_memories(as_of=True)
    assert [request.url.params.get("as_of") for request in seen] == [
        "42", "2026-12-01T10:00:00Z", "2026-12-01T10:00:00+00:00", "0", None, None, None]
    assert seen[1].url.params["scope"] == "global" and seen[2].url.params["q"] == "c"
    assert b"as_of=2026-12-01T10%3A00%3A00%2B00%3A00" in seen[2].url.query  # the + survives the query string

    async def asynchronous() -> None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        async with AsyncMemorydConsole("http://memoryd", token="t", httpx_client=client) as console:
            await console.get_memory("m", as_of=7)
            await console.list_memories(as_of=8)
            await console.search_memories("c", as_of=9)

    seen.clear()
    asyncio.run(asynchronous())
    assert [request.url.params["as_of"] for request in seen] == ["7", "8", "9"]


def test_the_iterators_read_every_page_of_the_list_and_of_a_search(app: Flask, tokens: dict[str, str]) -> None:
    with MemorydServer("http://memoryd", token=tokens["user"], httpx_client=wsgi_client(app)) as server:
        server.write_memories([{"action": "save", "name": f"note_{number}", "content": "needle " * (number % 3 + 1),
                                "description": "d", "scope": "user"} for number in range(7)])
        whole = server.list_memories(scope="user", limit=200)
        first = server.list_memories(scope="user", limit=3)
        assert whole.next_after is None and first.next_after is not None
        second = server.list_memories(scope="user", limit=3, after=first.next_after)
        assert [m.name for m in [*first, *second]] == [m.name for m in whole][:6]
        assert [m.name for m in server.iter_memories(scope="user", page=3)] == [m.name for m in whole]
        ranked = server.search_memories("needle", scope="user", limit=50)
        assert [m.name for m in server.search_memories("needle", scope="user", limit=2, offset=2)] == \
            [m.name for m in ranked][2:4]
        assert [m.name for m in server.iter_search_memories("needle", scope="user", page=2)] == [m.name for m in ranked]


@pytest.mark.postgres
def test_a_save_then_a_list_finds_it_while_workers_lag(built_postgres: Callable[..., Services], redis_url: str) -> None:
    services = built_postgres(redis_url, write_wait_ms=0)  # the save answers before its projection
    user = services.directory.create_user("alice")
    token = services.directory.create_token(user, ["read", "write"], [])[1]
    worker = spawn_worker(services)
    try:
        with MemorydServer("http://memoryd", token=token, httpx_client=wsgi_client(create_app(services))) as server:
            for number in range(10):
                server.save_memory(f"note_{number}", "fact", description="d")
                assert f"note_{number}" in [m.name for m in server.list_memories(limit=200)]
    finally:
        stop(worker)


def test_a_session_runs_the_tool_turns_signals_and_receipts(app: Flask, tokens: dict[str, str], services: Services) -> None:
    workstream = services.directory.create_workstream(tokens["user_id"], "ws")
    with MemorydConsole("http://memoryd", token=tokens["admin"], httpx_client=wsgi_client(app)) as console:
        session = console.open_session("interactive", workstream, user_id=tokens["user_id"])
        assert session.info is not None and session.info.token.startswith("mds_")
        assert session.memory("save", name="style", content="tabs", description="style").ok
        refused = session.memory("save", name="x", content="y", description="d", scope="galaxy")
        assert refused.ok is False and "invalid scope" in refused.error
        turn = session.turn([{"role": "user", "content": "what style do we use"}], system="You code.", turn_id="t1")
        assert turn.items[0].name == "style" and turn["system_message"]["content"].startswith("You code.\n\n<memories>")
        assert session.turn([{"role": "user", "content": "what style do we use"}], system="You code.",
                            turn_id="t1").replayed
        assert [nudge.type for nudge in session.signal("resume")] == ["resume"]
        assert session.receipt("t1").block_matches
        assert [receipt.turn_id for receipt in console.session_turns(session.session_id).receipts] == ["t1"]


def test_a_session_handle_carries_its_token_for_an_mcp_server_or_a_hook(app: Flask, tokens: dict[str, str],
                                                                        services: Services) -> None:
    workstream = services.directory.create_workstream(tokens["user_id"], "ws")
    with MemorydConsole("http://memoryd", token=tokens["admin"], httpx_client=wsgi_client(app)) as console:
        opened = console.open_session("interactive", workstream, user_id=tokens["user_id"])
        assert opened.info is not None and opened.token == opened.info.token
        found = console.session_of(opened.token)
        assert (found.session_id, found.token) == (opened.session_id, opened.token)
        assert console.session(opened.session_id, opened.token).token == opened.token


def test_a_turn_and_a_signal_name_the_tools_the_model_sees(app: Flask, tokens: dict[str, str], services: Services) -> None:
    workstream = services.directory.create_workstream(tokens["user_id"], "ws")
    names = {"search": "memory_search", "list": "memory_list"}
    with MemorydConsole("http://memoryd", token=tokens["admin"], httpx_client=wsgi_client(app)) as console:
        session = console.open_session("interactive", workstream, user_id=tokens["user_id"])
        assert session.memory("save", name="style", content="tabs", description="style").ok
        assert session.turn(query="style", tool_names=names).hint.endswith("Use memory_search() or memory_list() "
                                                                           "to find more.")
        assert "memory_search()" in session.signal("resume", tool_names=names)[0].text


def test_the_sdk_refuses_a_description_only_where_the_openapi_document_does(app: Flask, tokens: dict[str, str]) -> None:
    """One rule, the server's: its document says a description is not blank and has no maximum length."""
    rule = build_openapi()["components"]["schemas"]["SaveMemoryRequest"]["properties"]["description"]
    assert rule["minLength"] == 1 and "maxLength" not in rule
    with MemorydServer("http://memoryd", token=tokens["user"], httpx_client=wsgi_client(app)) as server:
        assert server.save_memory("long", "c", description="d" * 20_000).description == "d" * 20_000
        with pytest.raises(ValueError, match="description is required"):
            server.save_memory("blank", "c", description=" \n ")


def test_a_turn_makes_one_attempt_bounded_by_its_timeout_and_fails_open() -> None:
    """The bound is the request's own timeout and no retry (its wall time is in bench/agents)."""
    seen: list[httpx.Request] = []

    def slow(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ReadTimeout("memoryd took too long", request=request)

    with MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(transport=httpx.MockTransport(slow))) \
            as server:
        turn = server.session("s", "mds_token").turn(query="hi", system="You code.", timeout=0.5)
    assert len(seen) == 1 and seen[0].extensions["timeout"] == httpx.Timeout(0.5).as_dict()
    assert turn.degraded.startswith("memoryd unavailable") and turn.system_message["content"] == "You code."


def test_a_turn_fails_open_when_memoryd_is_down() -> None:
    with MemorydServer(f"http://127.0.0.1:{free_port()}", token="t", max_retries=0) as server:
        session = server.session("s", "mds_token")
        turn = session.turn([{"role": "user", "content": "hi"}], system="You code.", timeout=0.5)
        assert turn.degraded.startswith("memoryd unavailable") and turn.block == ""
        assert turn.system_message == {"role": "system", "content": "You code."}
        with pytest.raises(APIConnectionError):
            session.turn(query="hi", timeout=0.5, fail_open=False)


def test_the_async_clients_do_the_same_against_a_live_server(live_server: LiveServer) -> None:
    import asyncio

    caller = live_server.caller("async_sdk")

    async def scenario() -> None:
        async with AsyncMemorydServer(live_server.base_url, token=caller["token"]) as server:
            saved = await server.save_memory("async_note", "from asyncio", description="d", scope="user")
            found = await server.get_memory("async_note", scope="user")
            assert found.memory_id == saved.memory_id and found["content"] == "from asyncio"
            assert [m.name for m in await server.search_memories("asyncio", scope="user")] == ["async_note"]
            assert [m.name async for m in server.iter_memories(scope="user", page=1)] == ["async_note"]
            assert [m.name async for m in server.iter_search_memories("asyncio", scope="user")] == ["async_note"]
            assert (await server.delete_memory("async_note", scope="user")).status == "ok"
        async with AsyncMemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
            records = [record async for record in console.iter_audit(actor=caller["user_id"], page=1)]
            assert [record.action for record in records] == ["memory.save", "memory.delete"]

    asyncio.run(scenario())


def test_a_turn_fails_open_on_any_server_side_status_but_not_on_a_bad_request() -> None:
    answers = iter([httpx.Response(503, json={"error": "the read model has not caught up"}),
                    httpx.Response(500, json={"error": "Memory storage unavailable"}),
                    httpx.Response(400, json={"error": "placement must be one of system, tail, none"})])
    client = httpx.Client(transport=httpx.MockTransport(lambda request: next(answers)))
    with MemorydServer("http://memoryd", token="t", httpx_client=client) as server:
        session = server.session("s", "mds_token")
        assert "has not caught up" in session.turn(query="hi").degraded
        assert "storage unavailable" in session.turn(query="hi").degraded
        with pytest.raises(BadRequestError):
            session.turn(query="hi", placement="top")
