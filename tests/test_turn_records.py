"""What a turn leaves behind: turn numbers, receipts, read counters, and replays that change nothing."""

from __future__ import annotations

import hashlib

from sqlalchemy import Table, func, select

from memoryd.app.services import Services
from memoryd.storage.schema import memory_access, nudge_deliveries, turn_receipts
from tests.helpers import MakeCaller, World


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def reads(services: Services, memory_id: str) -> int:
    with services.database.read() as conn:
        return int(conn.execute(select(memory_access.c.access_count)
                                .where(memory_access.c.memory_id == memory_id)).scalar() or 0)


def rows(services: Services, table: Table) -> int:
    with services.database.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_turns_are_numbered_per_session_and_each_leaves_a_receipt(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    other = world.session(world.workstream(world.owner), world.owner)
    assert [agent.turn("one")["turn"], agent.turn("two")["turn"], other.turn("one")["turn"]] == [1, 2, 1]
    assert rows(services, turn_receipts) == 3


def test_the_injected_memories_reads_are_counted_once_per_turn(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    saved = agent.save("deploy_process", "deploy with buildkite")["memory"]["memory_id"]
    agent.save("unrelated", "coffee")
    unrelated = agent("get", name="unrelated")["memory"]["memory_id"]
    agent.turn("deploy")
    agent.turn("deploy")
    assert reads(services, saved) == 2 and reads(services, unrelated) == 1  # its one read is the get above


def test_a_retried_turn_id_replays_the_answer_and_changes_nothing(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    saved = agent.save("deploy_process", "deploy with buildkite")["memory"]["memory_id"]
    first = agent.turn("deploy", "no, deploy on fridays", turn_id="t-7", system="You are helpful.")
    assert [nudge["type"] for nudge in first["nudges"]] == ["correction"] and first["items"]
    before = (reads(services, saved), rows(services, turn_receipts), rows(services, nudge_deliveries))
    again = agent.turn("deploy", "no, deploy on fridays", turn_id="t-7", system="You are helpful.")
    assert again["replayed"] is True and {**again, "replayed": False} == first
    assert (reads(services, saved), rows(services, turn_receipts), rows(services, nudge_deliveries)) == before
    assert agent.turn("deploy")["turn"] == first["turn"] + 1


def test_a_turn_id_reused_for_another_request_is_a_409(world: World) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    agent.turn("deploy", turn_id="t-1")
    response = agent.post_turn({"query": "something else", "turn_id": "t-1"})
    assert response.status_code == 409 and "t-1" in response.json["error"]


def test_the_idempotency_key_names_the_turn_when_the_body_does_not(world: World) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    first = agent.post_turn({"query": "deploy"}, **{"Idempotency-Key": "k-1"}).json
    again = agent.post_turn({"query": "deploy"}, **{"Idempotency-Key": "k-1"}).json
    assert first["turn_id"] == "k-1" and again["replayed"] and again["turn"] == first["turn"]
    clash = agent.post_turn({"query": "deploy", "turn_id": "other"}, **{"Idempotency-Key": "k-1"})
    assert clash.status_code == 400


def test_a_preview_records_nothing_touches_nothing_and_charges_no_cooldown(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    saved = agent.save("deploy_process", "deploy with buildkite")["memory"]["memory_id"]
    preview = agent.turn("deploy", preview=True)
    assert preview["turn"] is None and preview["receipt_id"] is None
    assert [nudge["type"] for nudge in preview["nudges"]] == ["start"]
    assert reads(services, saved) == 0 and rows(services, turn_receipts) == 0 and rows(services, nudge_deliveries) == 0
    real = agent.turn("deploy")
    assert real["turn"] == 1 and [nudge["type"] for nudge in real["nudges"]] == ["start"]
    assert real["block"] == preview["block"] and reads(services, saved) == 1


def test_a_receipt_rebuilds_the_block_from_the_log_even_after_every_projection_is_rebuilt(world: World,
                                                                                          services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    agent.save("deploy_process", "deploy with <buildkite> & friends")
    turn = agent.turn("deploy", turn_id="t-1", system="You are helpful.")
    agent.save("deploy_process", "changed since: deploy by hand")  # a later version does not change the receipt
    agent("delete", name="deploy_process")
    services.projector.rebuild(services.memory_table)
    services.search.rebuild()
    receipt = agent.receipt("t-1").json
    assert receipt["block"] == turn["block"] and receipt["block_matches"] is True
    assert receipt["block_sha256"] == sha256(turn["block"]) == turn["block_sha256"]
    assert receipt["system_sha256"] == sha256(turn["system_message"]["content"])
    assert [item["memory_id"] for item in receipt["items"]] == [item["memory_id"] for item in turn["items"]]
    with services.database.read() as conn:
        stored = conn.execute(select(turn_receipts)).one()._mapping
    assert "buildkite" not in str(dict(stored))  # receipts hold ids, versions and hashes, never memory text


def test_a_receipt_is_the_sessions_own_and_unknown_turns_are_404(world: World) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    other = world.session(world.workstream(world.owner), world.owner)
    agent.turn("deploy", turn_id="t-1")
    assert agent.receipt("nope").status_code == 404
    assert other.client.get(f"/v1/api/sessions/{agent.session_id}/turns/t-1", headers=other.headers).status_code == 403


def test_admins_page_through_a_sessions_receipts_in_turn_order(world: World, make_caller: MakeCaller) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    for number in range(5):
        agent.turn(f"turn {number}", turn_id=f"t-{number}")
    path = f"/v1/api/admin/sessions/{agent.session_id}/turns"
    first = world.admin.get(f"{path}?limit=3").json
    rest = world.admin.get(f"{path}?limit=3&after={first['next_after']}").json
    assert [receipt["turn_id"] for receipt in first["receipts"] + rest["receipts"]] == [f"t-{n}" for n in range(5)]
    assert world.admin.get(f"{path}?limit=0").status_code == 400
    assert world.admin.get("/v1/api/admin/sessions/nope/turns").status_code == 404
    assert make_caller().get(path).status_code == 403


def test_receipts_older_than_the_retention_are_forgotten(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    agent.turn("old one", turn_id="old")
    clock = services.turns.clock
    services.turns.clock = lambda: clock() + 31 * 86_400  # a month on (the default retention is 30 days)
    agent.turn("new one", turn_id="new")
    assert agent.receipt("old").status_code == 404 and agent.receipt("new").status_code == 200


def test_a_session_reading_its_receipt_after_losing_access_gets_no_memory_text(world: World) -> None:
    world.grant(world.member, "read")
    owner = world.session(world.workstream(world.owner, world.project), world.owner)
    owner.save("launch_codes", "0000 and 1234", scope="project")
    member = world.session(world.workstream(world.member, world.project), world.member)
    assert [item["name"] for item in member.turn("launch codes", turn_id="t-1")["items"]] == ["launch_codes"]
    world.admin.delete(f"/v1/api/admin/projects/{world.project}/members/{world.member}")
    receipt = member.receipt("t-1").json
    assert receipt["withheld"] == 1 and receipt["block"] == "" and receipt["items"] == []
    assert "1234" not in str(receipt) and receipt["block_matches"] is True  # the log still holds what was shown
    admin_view = world.admin.get(f"/v1/api/admin/sessions/{member.session_id}/turns").json["receipts"][0]
    assert "0000 and 1234" in admin_view["block"] and admin_view["withheld"] == 0
