"""The first thing to break: a save is listed, on each backend."""

from __future__ import annotations

from tests.helpers import Caller, MakeCaller


def test_a_saved_memory_is_listed(alice: Caller) -> None:
    assert alice.save("hello").status_code == 201
    assert [m["name"] for m in alice.get("/v1/api/memories").json["memories"]] == ["hello"]


def test_a_saved_memory_is_listed_on_each_backend(any_make_caller: MakeCaller) -> None:
    caller = any_make_caller()
    assert caller.save("hello").status_code == 201
    assert caller.save("hello").status_code == 200
    assert caller.get("/v1/api/memories").json["total"] == 1
