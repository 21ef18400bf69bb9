def test_a_saved_memory_is_listed(alice):
    assert alice.save("hello").status_code == 201
    assert [m["name"] for m in alice.get("/v1/api/memories").json["memories"]] == ["hello"]


def test_a_saved_memory_is_listed_on_each_backend(any_make_caller):
    caller = any_make_caller()
    assert caller.save("hello").status_code == 201
    assert caller.save("hello").status_code == 200
    assert caller.get("/v1/api/memories").json["total"] == 1
