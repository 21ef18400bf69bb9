"""Group commit on the command bus, on SQLite and the real PostgreSQL: writes that arrive while another runs share
its next transaction, and each still gets exactly the answer, event and metadata it would have got alone."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pytest

from commands.bus import CommandBus, Dispatcher, MemoryCommand
from commands.handlers import Outcome
from commands.model import DeleteMemory, SaveMemory
from events.transaction import AppendTransaction
from events.types import EventMetadata
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace, utc_timestamp
from memoryd.kernel.errors import NotFound, VersionMismatch
from tests.helpers import rebuild_equals_live, table_rows

GLOBAL = Namespace("global", "")


class CountingDispatcher:
    """The services' dispatcher, counting the transactions that step the projections (one per group)."""

    def __init__(self, inner: Dispatcher) -> None:
        self.inner = inner
        self.steps: list[int] = []

    def appending(self, tx: AppendTransaction, position: int) -> bool:
        self.steps.append(position)
        return self.inner.appending(tx, position)

    def appended(self, position: int, projected: bool) -> None:
        self.inner.appended(position, projected)

    def settled(self, position: int) -> bool:
        return self.inner.settled(position)


class Line:
    """A bus with group commit whose first write is held inside its transaction until ``behind`` more wait."""

    def __init__(self, services: Services, behind: int) -> None:
        self.held, self.behind = threading.Event(), behind
        self.dispatcher = CountingDispatcher(services.bus.dispatcher)
        deps = replace(services.bus.deps, clock=self._clock)
        self.bus = CommandBus(deps, self.dispatcher, services.bus.keys, group_commit=True)

    def _clock(self) -> str:
        if not self.held.is_set():
            self.held.set()
            while self.bus_queued() < self.behind:
                time.sleep(0.001)
        return utc_timestamp()

    def bus_queued(self) -> int:
        writes = self.bus._writes
        assert writes is not None
        return writes.queued

    def run(self, first: MemoryCommand, rest: list[MemoryCommand]) -> tuple[Future[Outcome], list[Future[Outcome]]]:
        pool = ThreadPoolExecutor(1 + len(rest))
        leader = pool.submit(self.bus.handle, first, EventMetadata(surface="rest", request_id="r0"))
        self.held.wait(10)
        others = []
        for index, command in enumerate(rest, 1):  # one by one: the line keeps their order
            others.append(pool.submit(self.bus.handle, command, EventMetadata(surface="tool", request_id=f"r{index}")))
            while self.bus_queued() < index:
                time.sleep(0.001)
        pool.shutdown(wait=True)
        return leader, others


def save(name: str, content: str = "content", expected_version: int | None = None) -> SaveMemory:
    return SaveMemory(name, content, "a description", None, GLOBAL, expected_version)


def test_writes_waiting_behind_one_commit_together_each_with_its_own_event(any_services: Services) -> None:
    services = any_services
    services.bus.handle(save("kept", "first"), EventMetadata())
    line = Line(services, behind=4)
    leader, others = line.run(save("alpha"), [save("beta"), save("kept", "second"), DeleteMemory("kept", GLOBAL),
                                              save("gamma")])
    outcomes = [leader.result(), *(future.result() for future in others)]

    assert line.dispatcher.steps == [outcomes[0].position, outcomes[-1].position]  # one alone, then one group
    assert [outcome.position for outcome in outcomes] == list(range(2, 7))
    assert all(outcome.projected for outcome in outcomes)
    events = list(services.store.iter_all())[1:]
    assert [(event.event_type, event.metadata["request_id"], event.metadata["surface"]) for event in events] == [
        ("memory.save", "r0", "rest"), ("memory.save", "r1", "tool"), ("memory.update", "r2", "tool"),
        ("memory.delete", "r3", "tool"), ("memory.save", "r4", "tool")]
    assert sorted(row["name"] for row in table_rows(services)) == ["alpha", "beta", "gamma"]
    assert verify_chain(services.store).ok
    assert rebuild_equals_live(services)


def test_a_refused_write_fails_alone_and_the_rest_of_its_group_commits(any_services: Services) -> None:
    services = any_services
    line = Line(services, behind=3)
    leader, others = line.run(save("alpha"), [save("beta"), save("alpha", "stale", expected_version=7),
                                              DeleteMemory("missing", GLOBAL)])

    assert leader.result().position == 1 and others[0].result().position == 2
    with pytest.raises(VersionMismatch):
        others[1].result()
    with pytest.raises(NotFound):
        others[2].result()
    assert len(line.dispatcher.steps) == 2  # the group failed, then each ran alone: only beta appended
    assert [event.metadata["request_id"] for event in services.store.iter_all()] == ["r0", "r1"]
    assert {row["name"]: row["content"] for row in table_rows(services)} == {"alpha": "content", "beta": "content"}
