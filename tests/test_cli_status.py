"""``memoryd status``: what an operator reads to see whether projections keep up."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memoryd.app.services import Services
from memoryd.cli import main
from tests.helpers import run_queued_jobs, save_memory
from workers import jobs

DEAD_REDIS = "redis://127.0.0.1:1/0"


def explode() -> None:
    """A job that fails, as a broken deployment's would."""
    raise RuntimeError("this job always fails")


@pytest.fixture
def queue_name() -> str:
    """A queue of the test's own: other runs may share the test Redis database."""
    return f"memoryd-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def status(sqlite_url: str, queue_name: str) -> Any:
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"], env={"MEMORYD_DATABASE_URL": sqlite_url}).exit_code == 0

    def invoke(*args: str, redis_url: str = "") -> Result:
        env = {"MEMORYD_DATABASE_URL": sqlite_url, "MEMORYD_REDIS_URL": redis_url, "MEMORYD_QUEUE": queue_name}
        return runner.invoke(main, ["status", *args], env=env)

    return invoke




def save(services: Services, *names: str) -> None:
    for name in names:
        save_memory(services, name)


def test_status_reports_head_checkpoint_lag_and_no_queue_in_process(built: Any, status: Any) -> None:
    save(built(), "one", "two")

    result = status()

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "log head: position 2",
        "projection structured_memories: checkpoint 2, lag 0",
        "projection projects: checkpoint 2, lag 0",
        "queue: none (projections run in-process)",
    ]


def test_status_json_reports_the_same_as_one_object(built: Any, status: Any) -> None:
    save(built(), "one", "two")

    result = status("--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "head": 2,
        "projections": {"structured_memories": {"checkpoint": 2, "lag": 0, "stopped": None},
                        "projects": {"checkpoint": 2, "lag": 0, "stopped": None}},
        "queue": None,
    }


def test_status_on_a_fresh_database_reports_position_zero(status: Any) -> None:
    result = status("--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["head"] == 0


def test_status_with_redis_reports_lag_queue_depth_and_failed_jobs(
    built: Any, status: Any, redis_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = built(redis_url, queue=queue_name, write_wait_ms=0)
    monkeypatch.setattr(services.projector, "step", lambda position: False)  # as when a worker holds the checkpoints
    save(services, "one", "two")  # no worker yet: one catch-up job waits
    assert services.queue is not None
    services.queue.enqueue_call(explode)

    waiting = status(redis_url=redis_url)
    waiting_json = json.loads(status("--json", redis_url=redis_url).output)

    monkeypatch.setattr(jobs, "_services", services)
    run_queued_jobs(services)
    done = json.loads(status("--json", redis_url=redis_url).output)
    done_text = status(redis_url=redis_url)

    assert waiting.exit_code == 0, waiting.output
    assert waiting.output.splitlines() == [
        "log head: position 2",
        "projection structured_memories: checkpoint 0, lag 2",
        "projection projects: checkpoint 0, lag 2",
        f"queue {queue_name}: 2 waiting, 0 failed",
    ]
    assert waiting_json == {
        "head": 2,
        "projections": {"structured_memories": {"checkpoint": 0, "lag": 2, "stopped": None},
                        "projects": {"checkpoint": 0, "lag": 2, "stopped": None}},
        "queue": {"name": queue_name, "depth": 2, "failed_jobs": 0},
    }
    assert done == {
        "head": 2,
        "projections": {"structured_memories": {"checkpoint": 2, "lag": 0, "stopped": None},
                        "projects": {"checkpoint": 2, "lag": 0, "stopped": None}},
        "queue": {"name": queue_name, "depth": 0, "failed_jobs": 1},
    }
    assert done_text.output.splitlines()[-1] == f"queue {queue_name}: 0 waiting, 1 failed"


def test_status_with_redis_unreachable_still_reports_the_log_and_says_so(built: Any, status: Any, queue_name: str) -> None:
    save(built(DEAD_REDIS, queue=queue_name, write_wait_ms=0), "one")  # projected in process: no queue to hand it to

    text = status(redis_url=DEAD_REDIS)
    as_json = json.loads(status("--json", redis_url=DEAD_REDIS).output)

    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[:3] == ["log head: position 1", "projection structured_memories: checkpoint 1, lag 0",
                                            "projection projects: checkpoint 1, lag 0"]
    assert text.output.splitlines()[3].startswith(f"queue {queue_name}: Redis unreachable")
    assert as_json["head"] == 1
    assert as_json["queue"]["name"] == queue_name
    assert as_json["queue"]["error"].startswith("Redis unreachable")
