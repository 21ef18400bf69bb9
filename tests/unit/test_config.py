"""config.toml and environment overrides."""

from pathlib import Path

import pytest

from memoryd.kernel.config import Config, load_config
from memoryd.kernel.errors import ConfigError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_every_key_is_optional_and_the_defaults_are_the_specs(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, ""), environ={})
    assert config.memory == Config().memory
    assert (config.memory.relevance_k, config.memory.fetch_limit, config.memory.max_content) == (5, 50, 32768)
    assert (config.memory.nudge_cooldown, config.memory.nudges) == (300, True)
    assert config.storage.database_url.startswith("sqlite:///")


def test_values_come_from_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, """
[memory]
relevance_k = 7
nudges = false
[server]
port = 9000
[storage]
database_url = "sqlite:///elsewhere.db"
""")
    config = load_config(path, environ={})
    assert (config.memory.relevance_k, config.memory.nudges, config.server.port) == (7, False, 9000)
    assert config.storage.database_url == "sqlite:///elsewhere.db"


def test_the_environment_beats_the_file_and_can_name_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "[server]\nport = 9000\n[storage]\ndatabase_url = 'sqlite:///file.db'\n")
    config = load_config(environ={"MEMORYD_CONFIG": str(path), "MEMORYD_PORT": "9100",
                                  "MEMORYD_DATABASE_URL": "sqlite:///env.db"})
    assert config.server.port == 9100
    assert config.storage.database_url == "sqlite:///env.db"


def test_the_default_database_follows_xdg_data_home() -> None:
    config = load_config(environ={"XDG_DATA_HOME": "/srv/data"})
    assert config.storage.database_url == "sqlite:////srv/data/memoryd/memoryd.db"


@pytest.mark.parametrize(("text", "key"), [
    ("[memory]\nrelevance_k = 0", "memory.relevance_k"),
    ("[memory]\nrelevance_k = 'five'", "memory.relevance_k"),
    ("[memory]\nfetch_limit = 501", "memory.fetch_limit"),
    ("[memory]\nmax_content = 99", "memory.max_content"),
    ("[memory]\nnudge_cooldown = -1", "memory.nudge_cooldown"),
    ("[memory]\nnudges = 'maybe'", "memory.nudges"),
    ("[server]\nport = 70000", "server.port"),
    ("[storage]\ndatabase_url = ''", "storage.database_url"),
    ("[memory]\nrelevance = 3", "memory.relevance"),
    ("[cache]\nsize = 3", "cache"),
])
def test_an_invalid_value_stops_start_up_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(_write(tmp_path, text), environ={})


def test_an_invalid_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="MEMORYD_PORT"):
        load_config(environ={"MEMORYD_PORT": "eighty"})


def test_a_missing_or_broken_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml", environ={})
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "[memory"), environ={})
