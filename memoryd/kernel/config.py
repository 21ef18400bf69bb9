"""Configuration: ``config.toml`` plus environment overrides, read once.

The file path comes from ``--config`` or ``MEMORYD_CONFIG``; every key is
optional. An environment variable beats the file. An invalid value stops
start-up with a ``ConfigError`` that names the key.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.kernel.errors import ConfigError


def default_database_url(environ: Mapping[str, str] | None = None) -> str:
    """A SQLite file under the user's data directory (XDG), shared by CLI and server."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'memoryd' / 'memoryd.db'}"


def default_snapshot_dir(database_url: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where this host keeps the search snapshot files of one database: the user's cache directory (XDG),
    one folder per database URL, which every API process on the host shares."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryd" / "search" / hashlib.sha256(database_url.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class MemorySettings:
    """The spec's ``[memory]`` section."""

    relevance_k: int = 5
    fetch_limit: int = 50
    max_content: int = 32_768
    nudge_cooldown: int = 300
    nudges: bool = True
    receipt_retention_days: int = 30  # turn receipts older than this are forgotten; 0 keeps them


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 8
    max_body_bytes: int = 1_048_576
    read_wait_ms: int = 5_000  # how long a read with a minimum position may wait
    write_wait_ms: int = 5_000  # how long a write waits for its own event to be projected
    idempotency_window_hours: int = 24
    ready_max_lag: int = 10_000  # /readyz fails when a projection is further behind than this


@dataclass(frozen=True)
class StorageSettings:
    database_url: str = field(default_factory=default_database_url)


@dataclass(frozen=True)
class WorkerSettings:
    redis_url: str = ""  # empty: project in-process (the embedded default)
    queue: str = "memoryd"
    catch_up_interval_ms: int = 1_000  # workers catch up this often even when no job arrives


@dataclass(frozen=True)
class SearchSettings:
    """The analyzer's language, Okapi BM25 parameters, and the index's snapshots."""

    language: str = "english"  # a Snowball stemmer's language, or "none": projections.search.analysis
    k1: float = 1.2
    b: float = 0.5
    snapshot_every: int = 10_000  # workers store a new index snapshot after this many events
    snapshot_dir: str = ""  # where API processes keep the snapshot file they map; empty: default_snapshot_dir
    semantic: str = "off"  # the vector channel: "off", "local" (all-MiniLM-L6-v2 in-process) or "endpoint" (docs/recall.md)
    similarity_floor: float = 0.4  # the cosine a memory needs for the vector channel to count it
    embeddings_url: str = ""  # "endpoint": an OpenAI-compatible API's base, e.g. http://127.0.0.1:11434/v1
    embeddings_model: str = ""  # "endpoint": the model the endpoint embeds with
    embeddings_key: str = field(default="", repr=False)  # "endpoint": its API key, if it needs one (never logged)
    embeddings_dimension: int = 0  # "endpoint": its vectors' dimension; 0: learnt from its first answer
    embeddings_timeout_ms: int = 2_000  # "endpoint": longer than this, and a search goes on with BM25 alone


@dataclass(frozen=True)
class AuthSettings:
    """Lifetimes of credentials (docs/identities.md)."""

    default_token_days: int = 0  # a new token's lifetime when its creator names none; 0: tokens never expire
    session_idle_days: int = 30  # a session unused this long is closed; 0: never


@dataclass(frozen=True)
class Config:
    memory: MemorySettings = field(default_factory=MemorySettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)


@dataclass(frozen=True)
class _Key:
    section: str
    name: str
    parse: Callable[[str, Any], Any]
    env: str | None = None


def _integer(low: int, high: int | None = None) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer (got {value!r})")
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ConfigError(f"{key} must be {bound} (got {value})")
        return value

    return parse


def _number(low: float, high: float) -> Callable[[str, Any], float]:
    def parse(key: str, value: Any) -> float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise ConfigError(f"{key} must be a number between {low} and {high} (got {value!r})")
        return float(value)

    return parse


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
        return False
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{key} must be true or false (got {value!r})")


def _choice(*allowed: str) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        if not isinstance(value, str) or value.strip().lower() not in allowed:
            raise ConfigError(f"{key} must be one of {', '.join(map(repr, allowed))} (got {value!r})")
        return value.strip().lower()

    return parse


def _web_address(key: str, value: Any) -> str:
    address = _string(key, value)
    if not address.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{key} must be an http:// or https:// address (got {address!r})")
    return address.rstrip("/")


def _secret(key: str, value: Any) -> str:
    """A string that no error repeats: it may be a credential."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a non-empty string")
    return value.strip()


def _lowercase(key: str, value: Any) -> str:
    return _string(key, value).lower()


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a non-empty string (got {value!r})")
    return value.strip()


_KEYS = (
    _Key("memory", "relevance_k", _integer(1, 50)),
    _Key("memory", "fetch_limit", _integer(1, 500)),
    _Key("memory", "max_content", _integer(100, 65_536)),
    _Key("memory", "nudge_cooldown", _integer(0)),
    _Key("memory", "nudges", _boolean),
    _Key("memory", "receipt_retention_days", _integer(0, 36_500)),
    _Key("server", "host", _string, "MEMORYD_HOST"),
    _Key("server", "port", _integer(1, 65_535), "MEMORYD_PORT"),
    _Key("server", "threads", _integer(1, 256), "MEMORYD_THREADS"),
    _Key("server", "max_body_bytes", _integer(1_024), "MEMORYD_MAX_BODY_BYTES"),
    _Key("server", "read_wait_ms", _integer(0, 60_000), "MEMORYD_READ_WAIT_MS"),
    _Key("server", "write_wait_ms", _integer(0, 60_000), "MEMORYD_WRITE_WAIT_MS"),
    _Key("server", "idempotency_window_hours", _integer(1, 24 * 365), "MEMORYD_IDEMPOTENCY_WINDOW_HOURS"),
    _Key("server", "ready_max_lag", _integer(0), "MEMORYD_READY_MAX_LAG"),
    _Key("storage", "database_url", _string, "MEMORYD_DATABASE_URL"),
    _Key("workers", "redis_url", _string, "MEMORYD_REDIS_URL"),
    _Key("workers", "queue", _string, "MEMORYD_QUEUE"),
    _Key("workers", "catch_up_interval_ms", _integer(50, 3_600_000), "MEMORYD_CATCH_UP_INTERVAL_MS"),
    _Key("search", "language", _lowercase, "MEMORYD_SEARCH_LANGUAGE"),  # checked by the analyzer it makes
    _Key("search", "k1", _number(0.0, 10.0)),
    _Key("search", "b", _number(0.0, 1.0)),
    _Key("search", "snapshot_every", _integer(1)),
    _Key("search", "snapshot_dir", _string, "MEMORYD_SNAPSHOT_DIR"),
    _Key("search", "semantic", _choice("off", "local", "endpoint"), "MEMORYD_SEARCH_SEMANTIC"),
    _Key("search", "similarity_floor", _number(-1.0, 1.0)),
    _Key("search", "embeddings_url", _web_address, "MEMORYD_SEARCH_EMBEDDINGS_URL"),
    _Key("search", "embeddings_model", _string, "MEMORYD_SEARCH_EMBEDDINGS_MODEL"),
    _Key("search", "embeddings_key", _secret, "MEMORYD_SEARCH_EMBEDDINGS_KEY"),
    _Key("search", "embeddings_dimension", _integer(0, 65_536), "MEMORYD_SEARCH_EMBEDDINGS_DIMENSION"),
    _Key("search", "embeddings_timeout_ms", _integer(50, 600_000), "MEMORYD_SEARCH_EMBEDDINGS_TIMEOUT_MS"),
    _Key("auth", "default_token_days", _integer(0, 36_500), "MEMORYD_DEFAULT_TOKEN_DAYS"),
    _Key("auth", "session_idle_days", _integer(0, 36_500), "MEMORYD_SESSION_IDLE_DAYS"),
)
_SECTIONS = {"memory": MemorySettings, "server": ServerSettings, "storage": StorageSettings, "workers": WorkerSettings,
             "search": SearchSettings, "auth": AuthSettings}


def load_config(path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the file (if any), apply environment overrides, validate every key."""
    environ = os.environ if environ is None else environ
    path = path or environ.get("MEMORYD_CONFIG") or None
    document = _read_toml(Path(path)) if path else {}
    _reject_unknown(document)
    values: dict[str, dict[str, Any]] = {section: {} for section in _SECTIONS}
    values["storage"]["database_url"] = default_database_url(environ)
    for key in _KEYS:
        qualified = f"{key.section}.{key.name}"
        if key.env and environ.get(key.env):
            values[key.section][key.name] = key.parse(key.env, environ[key.env])
        elif key.name in document.get(key.section, {}):
            values[key.section][key.name] = key.parse(qualified, document[key.section][key.name])
    return Config(**{section: cls(**values[section]) for section, cls in _SECTIONS.items()})


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def _reject_unknown(document: dict[str, Any]) -> None:
    known = {(key.section, key.name) for key in _KEYS}
    for section, table in document.items():
        if section not in _SECTIONS or not isinstance(table, dict):
            raise ConfigError(f"unknown config section: {section}")
        for name in table:
            if (section, name) not in known:
                raise ConfigError(f"unknown config key: {section}.{name}")
