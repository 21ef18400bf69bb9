"""How a LangGraph item is kept as one memoryd memory, and how filters and namespace conditions match.

memoryd's names are snake_case (lowercased, ``-`` and spaces folded to ``_``), so a namespace and key
cannot be the name itself without losing case and characters. The name is a digest of both
(``lg_`` and 64 hex digits: fixed length, any key), and the content holds the namespace, key and value
as JSON, so everything round-trips exactly and BM25 ranks the value's words.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import Item, MatchCondition, SearchItem

from memoryd_sdk.models import MemoryInfo

NAME_PREFIX = "lg_"
DESCRIPTION = "langgraph store item"
MAX_CONTENT = 65_536  # memoryd's REST limit on content


def name_of(namespace: tuple[str, ...], key: str) -> str:
    """The memory name of ``(namespace, key)``: one per pair, whatever their characters."""
    digest = hashlib.sha256(json.dumps([list(namespace), key], ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return NAME_PREFIX + digest.hexdigest()


def content_of(namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> str:
    content = json.dumps({"namespace": list(namespace), "key": key, "value": dict(value)}, ensure_ascii=False)
    if len(content) > MAX_CONTENT:
        raise ValueError(f"the value of {key!r} in {namespace!r} is {len(content)} characters as JSON; memoryd keeps "
                         f"at most {MAX_CONTENT}")
    return content


def item_of(memory: MemoryInfo) -> SearchItem | None:
    """The item a memory holds (None: a memory this store did not write), with a search hit's score."""
    if not memory.name.startswith(NAME_PREFIX):
        return None
    try:
        held = json.loads(memory.content)
        namespace, key, value = tuple(held["namespace"]), held["key"], held["value"]
    except (ValueError, KeyError, TypeError):
        return None
    if name_of(namespace, key) != memory.name or not isinstance(value, dict):
        return None
    return SearchItem(namespace=namespace, key=key, value=value, created_at=_moment(memory.created),
                      updated_at=_moment(memory.updated), score=memory.score)


def plain(item: SearchItem) -> Item:
    return Item(value=item.value, key=item.key, namespace=item.namespace, created_at=item.created_at,
                updated_at=item.updated_at)


def _moment(text: str) -> dt.datetime:
    """memoryd's timestamps are UTC to the second, with no zone suffix."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC) if text else dt.datetime.now(dt.UTC)


def admits(value: Any, wanted: Any) -> bool:
    """A search ``filter`` as the reference stores read it: equality (nested objects match key by key, lists
    item by item), or operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``."""
    if isinstance(wanted, dict):
        if any(name.startswith("$") for name in wanted):
            return all(_compared(value, operator, operand) for operator, operand in wanted.items())
        return isinstance(value, dict) and all(admits(value.get(name), part) for name, part in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(wanted)
                and all(admits(have, want) for have, want in zip(value, wanted)))
    return bool(value == wanted)


def _compared(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    ordering = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}.get(operator)
    if ordering is None:
        raise ValueError(f"unsupported filter operator: {operator}")
    return bool(ordering(float(value), float(operand)))


def matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A ``list_namespaces`` prefix or suffix condition; ``*`` in it stands for any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        compared = zip(namespace, path)
    elif condition.match_type == "suffix":
        compared = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"unsupported match type: {condition.match_type}")
    return all(want == "*" or have == want for have, want in compared)
