"""The analyzer as a user meets it: memories in German, Spanish, Chinese and Japanese found in their own words, a
language chosen in the config, and an index of another analyzer never served (the index is built from the log,
and ``/readyz`` and the log say so)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from api.app import create_app
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.cli import main
from memoryd.kernel.config import Config, SearchSettings, StorageSettings, load_config
from memoryd.kernel.errors import ConfigError
from projections.filters import MemoryFilter
from tests.helpers import Caller, caller_factory, make_services

MEMORIES = "/v1/api/memories"


@pytest.fixture
def speaking(sqlite_url: str) -> Iterator[Callable[[str], tuple[Services, Caller]]]:
    """``speaking(language)``: services analyzing in ``language`` on a fresh database, and a caller of them."""
    made: list[Services] = []

    def build(language: str) -> tuple[Services, Caller]:
        made.append(make_services(sqlite_url, search=SearchSettings(language=language)))
        return made[-1], caller_factory(create_app(made[-1]), made[-1])()

    yield build
    for services in made:
        services.database.dispose()


def found(caller: Caller, query: str) -> list[str]:
    response = caller.post(f"{MEMORIES}/search", json={"query": query})
    assert response.status_code == 200, response.json
    return [memory["name"] for memory in response.json["memories"]]


@pytest.mark.parametrize(("language", "content", "query"), [
    ("german", "Die Kinder spielen im Garten hinter den Häusern", "Haus"),
    ("spanish", "Los niños estaban corriendo por las calles del pueblo", "niño calle"),
])
def test_a_memory_is_found_by_another_form_of_its_words_in_its_language(speaking: Callable[[str], tuple[Services, Caller]],
                                                                        language: str, content: str, query: str) -> None:
    _, caller = speaking(language)
    assert caller.save("note", content).status_code == 201
    assert caller.save("other", "nothing of the kind").status_code == 201
    assert found(caller, query) == ["note"]


def test_the_stemmer_is_the_languages_own(speaking: Callable[[str], tuple[Services, Caller]]) -> None:
    _, caller = speaking("english")
    caller.save("note", "Die Kinder spielen im Garten hinter den Häusern")
    assert found(caller, "Haus") == []  # English stems "häusern" to itself


@pytest.mark.parametrize(("content", "query"), [
    ("我们的部署流程使用持续集成", "部署流程"),
    ("来週の会議は東京で行います", "東京の会議"),
    ("서울에 있는 사무실로 이사했어요", "서울 사무실"),
])
def test_a_few_characters_of_text_written_without_spaces_find_their_memory(speaking: Callable[[str], tuple[Services, Caller]],
                                                                           content: str, query: str) -> None:
    _, caller = speaking("english")  # every language splits those scripts into bigrams
    caller.save("note", content)
    caller.save("other", "天气很好")
    assert found(caller, query) == ["note"]


def test_stopwords_alone_find_nothing(speaking: Callable[[str], tuple[Services, Caller]]) -> None:
    _, caller = speaking("english")
    caller.save("note", "what did they do")
    assert found(caller, "what did they do") == []
    assert found(caller, "note") == ["note"]


def test_none_matches_words_exactly_as_written(speaking: Callable[[str], tuple[Services, Caller]]) -> None:
    _, caller = speaking("none")
    caller.save("note", "Researching adoption agencies")
    assert found(caller, "research") == []
    assert found(caller, "researching") == ["note"]


def test_the_language_comes_from_the_config_or_the_environment_and_an_unknown_one_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[search]\nlanguage = 'German'\n")
    assert load_config(path, environ={}).search.language == "german"
    assert load_config(path, environ={"MEMORYD_SEARCH_LANGUAGE": "spanish"}).search.language == "spanish"
    assert Config().search.language == "english"
    config = Config(storage=StorageSettings(database_url=f"sqlite:///{tmp_path / 'm.db'}"),
                    search=SearchSettings(language="klingon"))
    with pytest.raises(ConfigError, match=r"search\.language: unknown search language 'klingon': use one of none, "):
        build_services(config)


def _restarted(services: Services, language: str) -> Services:
    return build_services(Config(storage=services.config.storage, search=SearchSettings(language=language)))


def test_a_snapshot_of_another_analyzer_is_never_served_the_index_is_built_from_the_log(speaking: Callable[[str],
                                                                                        tuple[Services, Caller]],
                                                                                        caplog: pytest.LogCaptureFixture) -> None:
    exact, caller = speaking("none")
    caller.save("adoption", "Researching adoption agencies")
    position = exact.search.save_snapshot()
    stemming = _restarted(exact, "english")
    try:
        with caplog.at_level(logging.INFO):
            hits = stemming.search.search(MemoryFilter(), "research", 5)
        readiness: Any = create_app(stemming).test_client().get("/readyz").json
        ready = readiness["search"]
    finally:
        stemming.database.dispose()
    assert len(hits) == 1  # stemmed from the log: the snapshot's exact words would not have matched
    reason = (f"the stored snapshot at position {position} was refused: it was built with the analyzer none/1; "
              f"this index analyzes with {stemming.search.analyzer.identity}")
    assert ready == {"analyzer": stemming.search.analyzer.identity, "index": f"built from the log: {reason}"}
    assert f"{reason}; building the search index from the log" in caplog.text
    assert "search index built from the log in" in caplog.text


def test_projections_verify_compares_a_snapshot_with_the_log_under_the_analyzer_that_built_it(speaking: Callable[[str],
                                                                                              tuple[Services, Caller]]) -> None:
    exact, caller = speaking("none")
    caller.save("adoption", "Researching adoption agencies")
    exact.search.save_snapshot()
    url = exact.database.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(main, ["projections", "verify"],
                                env={"MEMORYD_DATABASE_URL": url, "MEMORYD_SEARCH_LANGUAGE": "english"})
    assert result.exit_code == 0, result.output
    assert "search snapshot: equal" in result.output


def test_readyz_says_starting_while_the_index_is_built_from_the_log(speaking: Callable[[str], tuple[Services, Caller]],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    services, caller = speaking("english")
    caller.save("note", "some content")
    release, entered = threading.Event(), threading.Event()
    build = type(services.search)._from_the_log

    def slow_build(self: Any, *args: Any) -> Any:
        entered.set()
        release.wait(30)
        return build(self, *args)

    monkeypatch.setattr(type(services.search), "_from_the_log", slow_build)
    client = create_app(services).test_client()
    warming = services.search.warm_up()
    assert entered.wait(30)
    starting = client.get("/readyz")
    release.set()
    warming.join(30)
    assert starting.status_code == 503 and starting.get_json()["status"] == "starting"
    assert starting.get_json()["search"]["index"] == "building from the log: no snapshot is stored"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["search"]["index"] == "built from the log: no snapshot is stored"
