"""The semantic channel's vectors, a projection of the log: a save never waits for its embedding; vectors follow
saves, updates and deletes; a new model is a new projection built from position 0; a rebuild equals the live
projection; erasure takes them out and certifies it; an unavailable embedder is retried, not a fault; the lag shows
in ``memoryd status``, ``/metrics`` and ``/readyz``. On SQLite and PostgreSQL, in process and with a worker."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from api.app import create_app
from commands.model import DeleteMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.cli import main
from memoryd.embeddings.embedder import EmbeddingUnavailable, Vectors, memory_text
from memoryd.kernel.errors import NotFound
from memoryd.storage.schema import memory_vectors
from projections.semantic import VectorChannel
from projections.vector_verify import verify_vectors
from projections.vectors import from_bytes
from tests.fake_embeddings import FakeEmbedder
from tests.helpers import GLOBAL, caller_factory, make_services, save_memory, spawn_worker, stop, until

ERASURES = "/v1/api/admin/erasures"


@dataclass
class Semantic:
    services: Services
    embedder: FakeEmbedder
    channel: VectorChannel


@pytest.fixture
def semantic(database_url: str) -> Iterator[Semantic]:
    embedder = FakeEmbedder()
    services = make_services(database_url, embedder=embedder, ready_max_lag=1)
    assert services.vectors is not None
    yield Semantic(services, embedder, services.vectors)
    services.vectors.stop()
    services.database.dispose()


def stored(services: Services, model: str | None = None) -> dict[str, tuple[int, Vectors]]:
    """memory id -> (version, vector) of one model's rows (the channel's by default)."""
    assert services.vectors is not None
    with services.database.read() as conn:
        rows = conn.execute(select(memory_vectors.c.memory_id, memory_vectors.c.version, memory_vectors.c.vector)
                            .where(memory_vectors.c.model == (model or services.vectors.model))).all()
    return {row.memory_id: (row.version, from_bytes(row.vector)) for row in rows}


def embedded(embedder: FakeEmbedder, content: str, description: str = "description") -> Vectors:
    return embedder.embed([memory_text(description, content)]).reshape(-1)


def delete(services: Services, name: str) -> None:
    services.bus.handle(DeleteMemory(name, GLOBAL), EventMetadata(surface="cli"))


def cli(services: Services, monkeypatch: pytest.MonkeyPatch, embedder: FakeEmbedder, *args: str) -> Any:
    """A ``memoryd`` command whose services have the semantic channel on ``embedder`` (the configuration names real
    models only)."""
    monkeypatch.setattr("memoryd.cli.base.build_services", partial(build_services, embedder=embedder))
    url = services.database.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, list(args), env={"MEMORYD_DATABASE_URL": url})


def test_a_save_answers_while_the_embedder_is_blocked_and_bm25_finds_it_until_its_vector_follows(
        semantic: Semantic) -> None:
    caller = caller_factory(create_app(semantic.services), semantic.services)()
    saved = caller.save("kettle_note", "the kettle whistles at noon", "kitchen sounds")
    memory_id = saved.get_json()["memory_id"]
    found = caller.post("/v1/api/memories/search", json={"query": "kettle"})  # no catch-up has run: no vector
    assert [row["memory_id"] for row in found.get_json()["memories"]] == [memory_id] and stored(semantic.services) == {}
    semantic.embedder.blocked.clear()
    semantic.channel.start()
    semantic.embedder.called.wait(10)  # the catch-up is held in the embedder
    again = caller.save("kettle_note", "the kettle whistles at one", "kitchen sounds")
    assert again.status_code == 200, again.get_json()
    assert stored(semantic.services) == {}
    semantic.embedder.blocked.set()
    query = semantic.channel.embed_query(memory_text("kitchen sounds", "the kettle whistles at one"))
    until(lambda: semantic.channel.similarities(query, [memory_id]) != {} and stored(semantic.services)[memory_id][0] == 2,
          "the vector to follow the saves")
    semantic.channel.index.refresh()
    assert semantic.channel.similarities(query, [memory_id])[memory_id] == pytest.approx(1.0, abs=1e-5)


def test_vectors_follow_updates_and_deletes(semantic: Semantic) -> None:
    services, embedder, channel = semantic.services, semantic.embedder, semantic.channel
    memory_id = save_memory(services, "fruit", "apples are crisp").memory.memory_id
    kept = save_memory(services, "weather", "rain tomorrow").memory.memory_id
    channel.catch_up.run()
    assert stored(services)[memory_id][0] == 1
    save_memory(services, "fruit", "pears are soft")
    channel.catch_up.run()
    version, vector = stored(services)[memory_id]
    assert version == 2 and np.array_equal(vector, embedded(embedder, "pears are soft"))
    query = embedded(embedder, "pears are soft")
    assert channel.similarities(query, [memory_id, kept])[memory_id] > channel.similarities(query, [kept])[kept]
    delete(services, "fruit")
    channel.catch_up.run()
    assert set(stored(services)) == {kept}
    assert channel.index.holding([memory_id, kept]) == [kept]


def test_a_new_model_is_a_new_projection_built_from_position_zero(semantic: Semantic) -> None:
    services = semantic.services
    for name in ("alpha", "beta", "gamma"):
        save_memory(services, name, f"{name} content")
    delete(services, "beta")
    semantic.channel.catch_up.run()
    before = stored(services)
    other = VectorChannel(services.database, services.store, FakeEmbedder(dimension=32, model="another-model"))
    assert other.name != semantic.channel.name and other.checkpoint() == 0
    assert other.catch_up.run() == services.store.head_position()
    theirs = stored(services, other.model)
    assert set(theirs) == set(before) and all(vector.shape == (32,) for _, vector in theirs.values())
    other.rebuild()
    assert {key: version for key, (version, _) in stored(services).items()} == \
        {key: version for key, (version, _) in before.items()}  # the first model's rows are untouched
    assert verify_vectors(services.database, services.projector, other.projection).ok
    assert verify_vectors(services.database, services.projector, semantic.channel.projection).ok


def test_a_retired_models_vectors_are_listed_and_dropped_and_the_configured_models_kept(
        semantic: Semantic, monkeypatch: pytest.MonkeyPatch) -> None:
    services = semantic.services
    for name in ("alpha", "beta"):
        save_memory(services, name, f"{name} content")
    semantic.channel.catch_up.run()
    retired = VectorChannel(services.database, services.store, FakeEmbedder(dimension=32, model="retired-model"))
    retired.catch_up.run()

    def memoryd(*args: str) -> Any:
        return cli(services, monkeypatch, semantic.embedder, "projections", *args)

    listed = memoryd("models")
    assert listed.exit_code == 0, listed.output
    assert f"{semantic.channel.model}: 2 vectors (configured)\n" in listed.output
    assert f"{retired.model}: 2 vectors\n" in listed.output
    refused = memoryd("drop-model", semantic.channel.model)
    assert refused.exit_code == 1 and "projections rebuild vectors" in refused.output
    unknown = memoryd("drop-model", "no-such-model/3")
    assert unknown.exit_code == 1 and retired.model in unknown.output
    assert len(stored(services)) == 2 and len(stored(services, retired.model)) == 2  # neither refusal dropped any
    dropped = memoryd("drop-model", retired.model)
    assert dropped.exit_code == 0 and "dropped 2 vectors" in dropped.output
    assert stored(services, retired.model) == {} and retired.checkpoint() == 0
    assert len(stored(services)) == 2
    assert memoryd("models").output == f"{semantic.channel.model}: 2 vectors (configured)\n"
    assert memoryd("verify").exit_code == 0


WRITES = st.lists(st.tuples(st.sampled_from(["save", "save", "delete"]), st.integers(0, 3),
                            st.lists(st.sampled_from(["red", "green", "blue", "tea", "moon"]), min_size=1, max_size=4),
                            st.booleans()), max_size=12)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=WRITES)
def test_a_rebuild_equals_the_live_vectors_whatever_the_writes(semantic: Semantic,
                                                               writes: list[tuple[str, int, list[str], bool]]) -> None:
    services, channel = semantic.services, semantic.channel
    prefix = f"m{uuid.uuid4().hex[:6]}"
    for kind, which, words, catch_up in writes:
        name = f"{prefix}_{which}"
        if kind == "save":
            save_memory(services, name, " ".join(words))
        else:
            with suppress(NotFound):  # a delete of a memory not there (any more) appends nothing
                delete(services, name)
        if catch_up:
            channel.catch_up.step()
    assert verify_vectors(services.database, services.projector, channel.projection).ok  # at the live checkpoint
    channel.catch_up.run()
    live = stored(services)
    with services.database.read() as conn:
        gone = conn.execute(select(func.count()).select_from(memory_vectors)).scalar_one()
    assert gone == len(live)
    channel.rebuild()
    rebuilt = stored(services)
    assert rebuilt.keys() == live.keys()
    assert all(rebuilt[key][0] == live[key][0] and np.array_equal(rebuilt[key][1], live[key][1]) for key in live)


def test_verify_reports_a_vector_that_differs_from_the_log(semantic: Semantic, monkeypatch: pytest.MonkeyPatch) -> None:
    services = semantic.services
    memory_id = save_memory(services, "tampered", "what it said").memory.memory_id
    semantic.channel.catch_up.run()
    assert cli(services, monkeypatch, semantic.embedder, "projections", "verify").exit_code == 0
    with services.database.write() as conn:
        conn.execute(memory_vectors.update().where(memory_vectors.c.memory_id == memory_id)
                     .values(vector=np.ones(semantic.embedder.dimension, dtype="<f4").tobytes()))
    verified = cli(services, monkeypatch, semantic.embedder, "projections", "verify")
    assert verified.exit_code == 1
    assert f"{semantic.channel.name}: DIFFERENT" in verified.output and memory_id in verified.output
    assert cli(services, monkeypatch, semantic.embedder, "projections", "rebuild", "vectors").exit_code == 0
    assert cli(services, monkeypatch, semantic.embedder, "projections", "verify").exit_code == 0


def test_erasure_takes_the_vectors_out_and_the_certificate_says_so(semantic: Semantic,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    services = semantic.services
    make_caller = caller_factory(create_app(services), services)
    admin, alice, bob = make_caller("read,write", ("admin.memories",)), make_caller(), make_caller()
    erased = [alice.save(name, "obsidianfjord plans", scope="user").get_json()["memory_id"] for name in ("a", "b")]
    kept = bob.save("bobs", "bob keeps this").get_json()["memory_id"]
    semantic.channel.catch_up.run()
    assert semantic.channel.index.holding([*erased, kept]) == [*erased, kept]
    certificate = admin.post(ERASURES, json={"user_id": alice.user_id, "reason": "request 7"}).get_json()
    check = next(check for check in certificate["checks"] if check["store"] == "vectors")
    assert check["free"] and certificate["free"], certificate
    assert check["detail"].startswith("0 stored vectors")
    assert set(stored(services)) == {kept}
    semantic.channel.catch_up.run()  # the erase event applied afterwards changes nothing more
    assert set(stored(services)) == {kept} and semantic.channel.index.holding(erased) == []
    assert cli(services, monkeypatch, semantic.embedder, "audit", "verify").exit_code == 0
    assert cli(services, monkeypatch, semantic.embedder, "projections", "verify").exit_code == 0


def test_a_memory_erased_while_its_batch_is_embedded_is_not_written_back(semantic: Semantic) -> None:
    services, channel = semantic.services, semantic.channel
    memory_id = save_memory(services, "secret", "obsidianfjord").memory.memory_id
    semantic.embedder.blocked.clear()
    stepping = threading.Thread(target=channel.catch_up.step)
    stepping.start()
    until(semantic.embedder.called.is_set, "the step to read its batch and embed it")
    certificate, _ = services.erasures.erase({"memory_id": memory_id}, "request 8", EventMetadata(surface="cli"))
    assert certificate["free"], certificate
    semantic.embedder.blocked.set()
    stepping.join(30)
    assert memory_id not in stored(services)
    channel.catch_up.run()
    assert stored(services) == {}
    assert verify_vectors(services.database, services.projector, channel.projection).ok


def test_an_unavailable_embedder_is_retried_and_is_no_fault(semantic: Semantic) -> None:
    services, embedder, channel = semantic.services, semantic.embedder, semantic.channel
    memory_id = save_memory(services, "later", "embedded once the model answers").memory.memory_id
    embedder.unavailable = True
    with pytest.raises(EmbeddingUnavailable):
        channel.catch_up.step()
    assert channel.checkpoint() == 0 and services.projector.faults(everywhere=True) == []
    channel.start()
    until(lambda: embedder.calls >= 3, "the loop to retry")
    assert services.projector.faults(everywhere=True) == [] and stored(services) == {}
    embedder.unavailable = False
    until(lambda: memory_id in stored(services), "the vector once the embedder answers")


class Poisoned(FakeEmbedder):
    """Fails (not as unavailable) on any text holding ``poison``."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        if any("poison" in text for text in texts):
            raise ValueError("this text breaks the model")
        return super().embed(texts)


def test_a_text_the_embedder_fails_on_stops_the_vectors_alone_and_readyz_says_degraded(database_url: str) -> None:
    services = make_services(database_url, embedder=Poisoned())
    try:
        assert services.vectors is not None
        first = save_memory(services, "first", "fine text").memory.memory_id
        poisoned = save_memory(services, "second", "a poison pill").position
        save_memory(services, "third", "fine again")
        assert services.vectors.catch_up.run() == poisoned - 1
        assert set(stored(services)) == {first}
        (fault,) = services.projector.faults(everywhere=True)
        assert (fault.projection, fault.position) == (services.vectors.name, poisoned)
        assert services.projector.faults() == []  # the write path's projections (read-your-writes) go on
        assert "this text breaks the model" in fault.error
        ready = create_app(services).test_client().get("/readyz")
        assert ready.status_code == 200 and "vectors" in ready.get_json()["degraded"], ready.get_json()
    finally:
        services.database.dispose()


def test_the_lag_shows_in_status_metrics_and_readyz_without_failing_readiness(semantic: Semantic,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    services, channel = semantic.services, semantic.channel
    client = create_app(services).test_client()
    for name in ("one", "two"):
        save_memory(services, name)
    status = cli(services, monkeypatch, semantic.embedder, "status", "--json")
    assert status.exit_code == 0, status.output
    assert '"' + channel.name + '": {"checkpoint": 0, "lag": 2, "stopped": null}' in status.output
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f'memoryd_projection_lag_events{{projection="{channel.name}"}} 2.0' in metrics
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.get_json()
    assert ready.get_json()["vectors"] == {"projection": channel.name, "checkpoint": 0, "lag": 2}
    assert ready.get_json()["degraded"] == ["vectors"]  # past ready_max_lag (1): degraded, still ready
    channel.catch_up.run()
    assert client.get("/readyz").get_json()["vectors"]["lag"] == 0
    assert client.get("/readyz").get_json()["degraded"] == []
    assert f'memoryd_projection_lag_events{{projection="{channel.name}"}} 0.0' in client.get("/metrics").get_data(
        as_text=True)


def test_with_workers_the_worker_embeds_and_the_api_process_does_not(database_url: str, redis_url: str) -> None:
    services = make_services(database_url, redis_url, embedder=FakeEmbedder())
    worker = None
    try:
        caller = caller_factory(create_app(services), services)()
        ids = [caller.save(name, f"{name} notes").get_json()["memory_id"] for name in ("north", "south")]
        assert stored(services) == {}  # the API process never embeds with workers
        worker = spawn_worker(services, module="tests.vector_worker")
        until(lambda: set(stored(services)) == set(ids), "the worker to embed")
        assert caller.save("north", "north changed").status_code == 200
        assert caller.delete("/v1/api/memories/south").status_code == 200
        until(lambda: {key: version for key, (version, _) in stored(services).items()} == {ids[0]: 2},
              "the worker to follow the update and the delete")
    finally:
        if worker is not None:
            stop(worker)
        services.database.dispose()
