"""Runs ``sdk/scenarios/*.json`` with the Python SDK (the TypeScript runner, ``sdk/typescript/scripts/scenarios.mjs``,
reads the same files and follows the same rules)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from memoryd_sdk import MemorydAPIError, Session
from pydantic import BaseModel

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "sdk" / "scenarios").glob("*.json"))
_WHOLE = re.compile(r"\{([\w.]+)\}")
# "{long_description}" in a scenario: longer than the 512 characters the SDKs once refused and the server never did
LONG_DESCRIPTION = " ".join(["a description longer than any limit an SDK kept"] * 40)


def resolve(value: Any, names: dict[str, Any]) -> Any:
    """``"{a.b}"`` alone becomes that value (of any type); inside a longer string, its text."""
    if isinstance(value, str):
        whole = _WHOLE.fullmatch(value)
        if whole:
            return lookup(whole.group(1), names)
        return _WHOLE.sub(lambda match: str(lookup(match.group(1), names)), value)
    if isinstance(value, list):
        return [resolve(item, names) for item in value]
    if isinstance(value, dict):
        return {key: resolve(item, names) for key, item in value.items()}
    return value


def lookup(path: str, names: dict[str, Any]) -> Any:
    value: Any = names
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]  # a number indexes a list
    return value


def plain(result: Any) -> Any:
    """A result as JSON values, as the TypeScript SDK returns it."""
    if isinstance(result, Session):
        return (result.info.model_dump(mode="json") if result.info else {}) | {"session_id": result.session_id}
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, list):
        return [plain(item) for item in result]
    return result


def mismatch(expected: Any, actual: Any, where: str = "result") -> str | None:
    """Why ``actual`` does not contain ``expected`` (objects key by key, lists in full length), or None."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {actual!r}"
        for key, item in expected.items():
            if key not in actual:
                return f"{where}.{key}: missing"
            if (problem := mismatch(item, actual[key], f"{where}.{key}")) is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where}: expected {len(expected)} items, got {actual!r}"
        for number, (item, got) in enumerate(zip(expected, actual)):
            if (problem := mismatch(item, got, f"{where}[{number}]")) is not None:
                return problem
        return None
    return None if expected == actual else f"{where}: expected {expected!r}, got {actual!r}"


def counted(result: Any) -> int:
    if isinstance(result, dict):
        for key in ("memories", "records", "receipts", "nudges"):
            if key in result:
                return len(result[key])
    return len(result)


def run(path: Path, clients: dict[str, Any], context: dict[str, Any]) -> list[str]:
    """Every failed step of one scenario, described; [] when all passed."""
    scenario = json.loads(path.read_text())
    names: dict[str, Any] = dict(context)
    failures = []
    for number, step in enumerate(scenario["steps"]):
        label = f"{path.name} step {number} ({step['client']}.{step['call']})"
        client = clients.get(step["client"]) or names.get(f"session:{step['client']}")
        try:
            result = getattr(client, step["call"])(**resolve(step.get("args", {}), names))
            if step["call"].startswith("iter_") or step["call"] == "verify_chain":
                result = list(result)
        except MemorydAPIError as error:
            if error.status_code != step.get("error"):
                failures.append(f"{label}: HTTP {error.status_code}: {error.message}")
            continue
        if "error" in step:
            failures.append(f"{label}: expected HTTP {step['error']}, it succeeded")
            continue
        if isinstance(result, Session) and "save" in step:
            names[f"session:{step['save']}"] = result
        value = plain(result)
        if "save" in step:
            names[step["save"]] = value
        if "expect" in step and (problem := mismatch(resolve(step["expect"], names), value)) is not None:
            failures.append(f"{label}: {problem}")
        if "count" in step and counted(value) != step["count"]:
            failures.append(f"{label}: expected {step['count']} items, got {counted(value)}")
    return failures
