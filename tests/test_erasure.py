"""Erasure with a certificate: after ``POST /v1/api/admin/erasures`` the erased memories' names, descriptions
and contents are in nothing memoryd stores (the database files' bytes included, once compacted), no read
returns them, and the chain and every read model still verify; on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from memoryd.app.services import Services
from memoryd.cli import main
from memoryd.storage.schema import search_snapshots
from tests.helpers import Caller, MakeCaller

ERASURES = "/v1/api/admin/erasures"
SECRETS = ("zanzibarquux", "marmalade_vortex", "obsidianfjord")  # in a name, a description, a content


def _cli(services: Services, *args: str) -> Any:
    url = services.database.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, list(args), env={"MEMORYD_DATABASE_URL": url})


@pytest.fixture
def erasable(any_make_caller: MakeCaller, any_services: Services) -> tuple[Caller, Caller, Caller, list[str]]:
    """alice's memories (her user scope, one global she wrote, one she deleted), bob's, and a snapshot."""
    admin = any_make_caller("read,write", ("admin.memories",))
    alice, bob = any_make_caller(), any_make_caller()
    ids = []
    for version in ("first", "second"):
        saved = alice.save("marmalade_vortex", f"{version} obsidianfjord", "zanzibarquux plans", scope="user")
        assert saved.status_code in (200, 201), saved.get_json()
    ids.append(saved.get_json()["memory_id"])
    shared = alice.post("/v1/api/memories", json={"name": "team_note", "content": "obsidianfjord in global",
                                                  "description": "d"}, headers={"Idempotency-Key": "k-1"})
    ids.append(shared.get_json()["memory_id"])
    gone = alice.save("old_thought", "obsidianfjord once", "zanzibarquux", scope="user")
    ids.append(gone.get_json()["memory_id"])
    assert alice.delete("/v1/api/memories/old_thought?scope=user").status_code == 200
    assert bob.save("bobs_note", "bob keeps this", "bob's").status_code == 201
    any_services.search.save_snapshot()
    return admin, alice, bob, ids


def test_erasing_a_user_takes_every_memory_of_theirs_and_certifies_each_store(erasable: tuple[Caller, Caller, Caller,
                                                                              list[str]], any_services: Services) -> None:
    admin, alice, _, ids = erasable
    answer = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "GDPR request 42"})
    assert answer.status_code == 201, answer.get_json()
    certificate = answer.get_json()
    assert certificate["free"] is True
    assert sorted(certificate["memories"]) == sorted(ids)
    assert certificate["selector"] == {"user_id": alice.user_id} and certificate["reason"] == "GDPR request 42"
    assert certificate["erased_by"] == admin.user_id
    assert certificate["positions"] == [1, 2, 3, 4, 5]  # a save and its update, a save, a save and its delete
    assert {check["store"] for check in certificate["checks"]} == {
        "log", "structured_memories", "search index", "vectors", "search snapshots", "idempotency answers"}
    assert all(check["free"] for check in certificate["checks"])
    assert certificate["snapshots_dropped"] == 1 and certificate["idempotency_keys_forgotten"] >= 1
    with any_services.database.read() as conn:
        assert conn.execute(select(search_snapshots)).all() == []


def test_after_an_erasure_no_read_returns_it_and_the_rest_stays(erasable: tuple[Caller, Caller, Caller, list[str]]) -> None:
    admin, alice, bob, ids = erasable
    admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request"})
    for secret in SECRETS:
        assert admin.get(f"/v1/api/admin/memories/search?q={secret}").get_json()["memories"] == []
        assert alice.post("/v1/api/memories/search", json={"query": secret}).get_json()["memories"] == []
    listed = admin.get("/v1/api/admin/memories").get_json()
    assert [memory["name"] for memory in listed["memories"]] == ["bobs_note"] and listed["total"] == 1
    for memory_id in ids:
        assert admin.get(f"/v1/api/admin/memories/{memory_id}").status_code == 404
        history = admin.get(f"/v1/api/admin/memories/{memory_id}/history")
        assert history.status_code == 404 or not any(secret in history.get_data(as_text=True) for secret in SECRETS)
    audit = admin.get("/v1/api/admin/audit?limit=1000").get_data(as_text=True)
    events = admin.get("/v1/api/admin/events?limit=1000").get_data(as_text=True)
    assert not any(secret in text for secret in SECRETS for text in (audit, events))
    assert "memory.erase" in events
    assert bob.get("/v1/api/memories/bobs_note").status_code == 200
    again = alice.save("marmalade_vortex", "a new beginning", "fresh", scope="user")  # the name is free again
    assert again.status_code == 201 and again.get_json()["memory_id"] not in ids


def test_the_chain_and_every_read_model_still_verify(erasable: tuple[Caller, Caller, Caller, list[str]], any_services: Services,
                                                     tmp_path: Path) -> None:
    admin, alice, _, _ = erasable
    admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request"})
    any_services.search.save_snapshot()
    assert _cli(any_services, "audit", "verify").exit_code == 0
    verified = _cli(any_services, "projections", "verify")
    assert verified.exit_code == 0, verified.output
    exported = tmp_path / "log.jsonl"
    assert _cli(any_services, "events", "export", str(exported)).exit_code == 0
    assert not any(secret in exported.read_text() for secret in SECRETS)


def test_a_forged_stub_without_an_erasure_fails_the_chain(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                          any_services: Services) -> None:
    from sqlalchemy import update

    from events.types import ErasedEvent
    from memoryd.storage.schema import events

    with any_services.database.write() as conn:  # content removed behind the log's back, dressed as an erasure
        conn.execute(update(events).where(events.c.position == 1).values(payload=ErasedEvent.stub(99, "x")))
    result = _cli(any_services, "audit", "verify")
    assert result.exit_code == 1 and "at position 1: the payload does not match its digest" in result.output


def test_nothing_of_it_is_left_in_the_database_s_bytes(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                       any_services: Services, tmp_path: Path) -> None:
    admin, alice, _, _ = erasable
    admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request"})
    database = any_services.database
    if database.dialect == "sqlite":
        raw = database.engine.raw_connection()  # VACUUM runs outside a transaction
        try:
            raw.cursor().execute("VACUUM")
            raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
        path = Path(str(database.url.database))
        stored = b"".join(file.read_bytes() for file in path.parent.glob(path.name + "*"))
    else:
        with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
            for table in ("events", "structured_memories", "memory_counts", "idempotency_keys", "search_snapshots"):
                conn.exec_driver_sql(f"VACUUM FULL {table}")
        dump = subprocess.run(["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "-n", schema, "test"],
                              capture_output=True, check=True)
        stored = dump.stdout
        assert b"bob keeps this" in stored  # the dump holds the schema's data
    assert not any(secret.encode() in stored for secret in SECRETS)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"reason": "r"}, 400, "name what to erase"),
    ({"user_id": "u", "memory_id": "m", "reason": "r"}, 400, "name what to erase"),
    ({"scope": "user", "reason": "r"}, 400, "name what to erase"),
    ({"scope": "galaxy", "scope_id": "x", "reason": "r"}, 400, "scope must be one of"),
    ({"scope": "global", "scope_id": "x", "reason": "r"}, 400, "scope_id is empty for the global scope"),
    ({"user_id": "u"}, 400, "reason is required"),
    ({"user_id": "  ", "reason": "r"}, 400, "user_id must not be empty"),
    ({"memory_id": "no-such-memory", "reason": "r"}, 404, "nothing to erase"),
])
def test_a_bad_or_empty_erasure_request_erases_nothing(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                       any_services: Services, body: dict[str, Any], status: int,
                                                       message: str) -> None:
    admin = erasable[0]
    head = any_services.store.head_position()
    answer = admin.post(ERASURES, json=body)
    assert answer.status_code == status and message in answer.get_json()["error"], answer.get_json()
    assert any_services.store.head_position() == head


def test_one_memory_or_one_namespace_can_be_erased_alone(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                         any_services: Services) -> None:
    admin, alice, bob, ids = erasable
    one = admin.post(ERASURES, json={"memory_id": ids[1], "reason": "just that note"}).get_json()
    assert one["memories"] == [ids[1]] and one["free"]
    space = admin.post(ERASURES, json={"scope": "user", "scope_id": alice.user_id, "reason": "her scope"}).get_json()
    assert sorted(space["memories"]) == sorted([ids[0], ids[2]]) and space["free"]
    assert bob.get("/v1/api/memories/bobs_note").status_code == 200
    assert _cli(any_services, "audit", "verify").exit_code == 0


def test_only_admins_erase(erasable: tuple[Caller, Caller, Caller, list[str]]) -> None:
    _, alice, _, _ = erasable
    assert alice.post(ERASURES, json={"user_id": alice.user_id, "reason": "me"}).status_code == 403


def test_a_write_racing_the_erasure_is_either_erased_or_after_it(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                 any_services: Services) -> None:
    import threading

    admin, alice, _, _ = erasable
    stop, written = threading.Event(), list[str]()

    def write() -> None:
        while not stop.is_set():
            answer = alice.save("race_note", f"racingsecret {len(written)}", "d", scope="user")
            written.append(answer.status_code)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while len(written) < 3:
            threading.Event().wait(0.005)
        certificate = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "race"}).get_json()
    finally:
        stop.set()
        writer.join()
    assert certificate["free"]
    before = [event for event in any_services.store.iter_all() if event.position < certificate["position"]]
    assert not any("racingsecret" in str(event.payload) for event in before)
    assert _cli(any_services, "audit", "verify").exit_code == 0


def test_the_same_erasure_again_runs_its_checks_again_and_reissues_the_certificate(erasable: tuple[Caller, Caller, Caller,
                                                                                   list[str]], any_services: Services) -> None:
    admin, alice, _, ids = erasable
    first = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request 1"})
    any_services.search.catch_up()
    with any_services.database.write() as conn:  # as if the first request had died before dropping the snapshots
        conn.execute(search_snapshots.insert().values(position=1, created="2026-12-01T00:00:00", data=b"stale"))
    again = admin.post(ERASURES, json={"user_id": f" {alice.user_id} ", "reason": "request 1, retried"})
    assert first.status_code == 201 and again.status_code == 200
    reissued = again.get_json()
    assert reissued["position"] == first.get_json()["position"] and reissued["reason"] == "request 1"
    assert reissued["erased_by"] == admin.user_id and sorted(reissued["memories"]) == sorted(ids)
    assert reissued["free"] and reissued["snapshots_dropped"] == 1


def test_a_rebuild_or_a_snapshot_racing_an_erasure_keeps_nothing_of_it(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                       any_services: Services,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from projections.search import service as search_service

    admin, alice, _, _ = erasable
    real_feed = search_service.SearchService._feed
    erased: list[int] = []

    def feed_then_erase(self: Any, index: Any, progress: Any = None) -> Any:  # the erasure commits while a fresh index is read
        fault = real_feed(self, index, progress)
        if not erased and index is not self._index:
            erased.append(0)  # once: the erasure's own catch-up builds a fresh index too
            erased[0] = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "race"}).status_code
        return fault

    monkeypatch.setattr(search_service.SearchService, "_feed", feed_then_erase)
    rebuilt = any_services.search.rebuild().to_bytes()  # its words included: every one it ever indexed
    assert not any(secret.encode() in rebuilt for secret in SECRETS)
    position = any_services.search.save_snapshot()
    assert erased == [201]
    with any_services.database.read() as conn:
        blobs = [row.data for row in conn.execute(select(search_snapshots))]
    assert len(blobs) == 1 and not any(secret.encode() in blob for secret in SECRETS for blob in blobs)
    assert any_services.search.catch_up().holding(erasable[3]) == [] and position >= 1
    assert admin.get("/v1/api/admin/memories/search?q=obsidianfjord").get_json()["memories"] == []


def test_an_answer_read_while_an_erasure_committed_is_never_kept(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                 any_services: Services) -> None:
    from events.idempotency import IdempotencyClaim

    admin, alice, _, _ = erasable
    keys = any_services.idempotency
    reading = IdempotencyClaim(alice.user_id, "tool-get", "fingerprint")
    assert keys.take(reading) is None  # a tool read with an Idempotency-Key starts...
    before = keys.erasure_mark()
    admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request"})  # ...an erasure commits...
    keys.remember(reading, 200, {"memory": {"content": "first obsidianfjord"}}, before)  # ...then it answers
    assert keys.find(alice.user_id, "tool-get") is None  # not kept: a retry reads again, after the erasure
    later = IdempotencyClaim(alice.user_id, "tool-get-2", "fingerprint")
    keys.take(later)
    keys.remember(later, 200, {"ok": True}, keys.erasure_mark())
    kept = keys.find(alice.user_id, "tool-get-2")
    assert kept is not None and kept.response == {"ok": True}  # an answer after it is kept


def test_an_erasure_retried_with_its_idempotency_key_replays_its_certificate(erasable: tuple[Caller, Caller, Caller,
                                                                             list[str]]) -> None:
    admin, alice, _, _ = erasable
    key = {"Idempotency-Key": "erase-1"}
    first = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "gdpr"}, headers=key)
    again = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "gdpr"}, headers=key)
    assert first.status_code == again.status_code == 201 and again.get_json() == first.get_json()


def test_a_session_opened_while_an_unrelated_erasure_commits_keeps_its_key(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                           any_services: Services,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from events.types import EventMetadata

    admin, alice, bob, _ = erasable
    workstream = any_services.directory.create_workstream(bob.user_id, "bench")
    opening = any_services.identities.open_session

    def open_session(*args: Any, **kwargs: Any) -> Any:  # an erasure commits while the request runs
        monkeypatch.setattr(any_services.identities, "open_session", opening)
        any_services.erasures.erase({"user_id": alice.user_id}, "gdpr", EventMetadata())
        return opening(*args, **kwargs)

    monkeypatch.setattr(any_services.identities, "open_session", open_session)
    body = {"kind": "interactive", "workstream_id": workstream, "user_id": bob.user_id}
    first = admin.post("/v1/api/sessions", json=body, headers={"Idempotency-Key": "open-1"})
    again = admin.post("/v1/api/sessions", json=body, headers={"Idempotency-Key": "open-1"})
    assert first.status_code == 201, first.get_json()
    assert again.get_json()["session_id"] == first.get_json()["session_id"]


def test_a_memory_deleted_before_its_erasure_leaves_no_word_in_the_index(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                         any_services: Services) -> None:
    admin, alice, _, _ = erasable
    assert alice.save("deleted_first", "quokkaglyph words", "d", scope="user").status_code == 201
    any_services.search.catch_up()  # the serving index read it, then the delete
    assert alice.delete("/v1/api/memories/deleted_first?scope=user").status_code == 200
    any_services.search.catch_up()
    assert admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "gdpr"}).get_json()["free"]
    any_services.search.save_snapshot()
    with any_services.database.read() as conn:
        blobs = [row.data for row in conn.execute(select(search_snapshots))]
    assert blobs and not any(b"quokkaglyph" in bytes(blob) for blob in blobs)
    assert b"quokkaglyph" not in any_services.search.catch_up().to_bytes()


def test_a_snapshot_is_not_stored_by_an_index_stopped_before_an_erasure(erasable: tuple[Caller, Caller, Caller, list[str]],
                                                                        any_services: Services) -> None:
    import threading

    admin, alice, _, _ = erasable
    any_services.store.append_rows([dict(stream_id="memory:broken", stream_version=1, event_type="memory.save",
                                         schema_version=1, payload={"memory": {"memory_id": "x"}}, meta={},
                                         recorded_at="2026-12-01T00:00:00Z")])  # an event no index can apply
    admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "gdpr"})  # the projections stop before it
    stored: list[int] = []
    saving = threading.Thread(target=lambda: stored.append(any_services.search.save_snapshot()), daemon=True)
    saving.start()
    saving.join(20)
    assert not saving.is_alive(), "save_snapshot did not return"
    with any_services.database.read() as conn:
        positions = [row.position for row in conn.execute(select(search_snapshots))]
    assert positions == [] and stored == [0]
