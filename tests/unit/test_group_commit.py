"""Group commit's line: who leads, who waits, and that every write gets its own answer exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commands.group_commit import GroupCommit


class Refused(Exception):
    """A write its own run turns down (an odd number, here)."""


class Recorder:
    """Runs that answer ``10 * item`` and refuse odd items, alone or in a group (a group with one fails whole),
    recording who ran what; ``hold`` keeps the first run waiting until released."""

    def __init__(self, hold: bool = False) -> None:
        self.groups: list[list[int]] = []
        self.alone: list[int] = []
        self.running = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def run_one(self, item: int) -> int:
        self.running.set()
        self.release.wait(10)
        self.alone.append(item)
        if item % 2:
            raise Refused(str(item))
        return 10 * item

    def run_group(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        time.sleep(0.001)  # a transaction takes time: more arrive meanwhile
        if any(item % 2 for item in items):
            raise Refused("a group with an odd item fails whole")
        return [10 * item for item in items]


def answer(future: Future[int]) -> int | str:
    try:
        return future.result(10)
    except Refused as refused:
        return f"refused {refused}"


def wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_write_alone_runs_at_once_on_its_own() -> None:
    recorder = Recorder()
    line = GroupCommit(recorder.run_group, recorder.run_one)
    assert line.submit(4) == 40
    assert (recorder.alone, recorder.groups) == ([4], [])


def test_writes_arriving_while_one_runs_go_together_next_and_each_gets_its_own_answer() -> None:
    recorder = Recorder(hold=True)
    line = GroupCommit(recorder.run_group, recorder.run_one)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(line.submit, 2)
        recorder.running.wait(10)
        rest = {item: pool.submit(line.submit, item) for item in (4, 6, 8, 10)}
        wait_for(lambda: line.queued == 4)
        recorder.release.set()
        assert answer(first) == 20
        assert {item: answer(future) for item, future in rest.items()} == {4: 40, 6: 60, 8: 80, 10: 100}
    assert recorder.alone == [2]
    assert [sorted(group) for group in recorder.groups] == [[4, 6, 8, 10]]


def test_a_failed_group_runs_again_one_write_at_a_time_and_only_the_refused_one_fails() -> None:
    recorder = Recorder(hold=True)
    line = GroupCommit(recorder.run_group, recorder.run_one)
    with ThreadPoolExecutor(5) as pool:
        first = pool.submit(line.submit, 2)
        recorder.running.wait(10)
        rest = {item: pool.submit(line.submit, item) for item in (4, 5, 6)}
        wait_for(lambda: line.queued == 3)
        recorder.release.set()
        assert answer(first) == 20
        assert {item: answer(future) for item, future in rest.items()} == {4: 40, 5: "refused 5", 6: 60}
    assert sorted(recorder.alone) == [2, 4, 5, 6]


def test_a_group_holds_at_most_the_limit_and_the_rest_lead_the_next() -> None:
    recorder = Recorder(hold=True)
    line = GroupCommit(recorder.run_group, recorder.run_one, limit=3)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(line.submit, 0)
        recorder.running.wait(10)
        rest = {item: pool.submit(line.submit, item) for item in range(2, 16, 2)}
        wait_for(lambda: line.queued == 7)
        recorder.release.set()
        assert {item: answer(future) for item, future in rest.items()} == {item: 10 * item for item in rest}
        assert answer(first) == 0
    assert [len(group) for group in recorder.groups] == [3, 3] and recorder.alone == [0, 14]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 1_000), min_size=1, max_size=40), st.integers(1, 8), st.integers(1, 6))
def test_every_write_is_answered_exactly_once_with_its_own_answer(items: list[int], threads: int, limit: int) -> None:
    recorder = Recorder()
    line = GroupCommit(recorder.run_group, recorder.run_one, limit=limit)
    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(line.submit, item) for item in items]
        answers = [answer(future) for future in futures]
    assert answers == [f"refused {item}" if item % 2 else 10 * item for item in items]
    committed = [item for group in recorder.groups if not any(i % 2 for i in group) for item in group]
    assert sorted(committed + recorder.alone) == sorted(items)  # once each: in a group that held, or alone
    assert all(len(group) <= limit for group in recorder.groups)
    assert line.queued == 0


def test_an_interrupted_leader_still_wakes_its_group_and_hands_on_the_line() -> None:
    calls: list[int] = []
    release = threading.Event()

    def run_one(item: int) -> int:
        calls.append(item)
        if item == 1:
            release.wait(10)
            raise KeyboardInterrupt  # not an Exception: nothing answers it, but nobody may hang on it
        return item

    line = GroupCommit(lambda items: list(items), run_one)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(line.submit, 1)
        wait_for(lambda: calls == [1])
        second = pool.submit(line.submit, 2)
        wait_for(lambda: line.queued == 1)
        release.set()
        with pytest.raises(KeyboardInterrupt):
            first.result(10)
        assert second.result(10) == 2
