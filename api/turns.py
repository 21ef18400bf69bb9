"""The turn routes: what an agent runtime calls once per turn, and the receipts of what it was given.

``POST /v1/api/sessions/{id}/turns`` composes the turn (the session's own
token, as for the memory tool); ``POST .../signals`` answers the nudges a
tool-loop event earns; ``GET .../turns/{turn_id}`` is one receipt, and
``GET /v1/api/admin/sessions/{id}/turns`` pages a session's receipts for
auditors (``GET /v1/api/admin/memories/{id}/turns``: the turns that showed
a memory). ``Idempotency-Key`` names the turn when the body has no
``turn_id``: a retry replays the recorded turn.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, g, jsonify, request

from api.consistency import requested_min_position
from api.context import authorized, json_object, metrics, services
from api.idempotency import KEY_HEADER, checked_key
from api.schemas import MemoryTurnsQuery, ReceiptsQuery, load
from api.sessions import session_authorized
from memoryd.app.turn import Item, Nudge, Signal, Turn, TurnReceipt, TurnRequest
from memoryd.kernel.errors import NotFound, ValidationError

blueprint = Blueprint("turns", __name__)


@blueprint.post("/v1/api/sessions/<session_id>/turns")
@session_authorized
def compose(session_id: str) -> tuple[Response, int]:
    body = json_object()
    key = request.headers.get(KEY_HEADER)
    if key is not None:
        key = checked_key(key)
        if body.get("turn_id") not in (None, key):
            raise ValidationError(f"turn_id and {KEY_HEADER} name different turns; send one of them")
        body = body | {"turn_id": key}
    if "min_position" not in body and (wanted := requested_min_position()):
        body = body | {"min_position": wanted}
    turn_request = TurnRequest.parse(body)
    with metrics().turns.time():
        turn = services().turns.compose(g.session, turn_request)
    return jsonify(turn_body(turn)), 200


@blueprint.post("/v1/api/sessions/<session_id>/signals")
@session_authorized
def signal(session_id: str) -> tuple[Response, int]:
    nudges = services().turns.signal(g.session, Signal.parse(json_object()))
    return jsonify({"nudges": [_nudge(nudge) for nudge in nudges]}), 200


@blueprint.get("/v1/api/sessions/<session_id>/turns/<anything:turn_id>")
@session_authorized
def receipt(session_id: str, turn_id: str) -> tuple[Response, int]:
    found = services().turns.receipt(g.session, turn_id)
    if found is None:
        raise NotFound("no turn with this turn_id in this session")
    return jsonify(receipt_body(found)), 200


@blueprint.get("/v1/api/admin/sessions/<session_id>/turns")
@authorized("read", admin=True)
def receipts(session_id: str) -> tuple[Response, int]:
    if services().sessions.get(session_id) is None:
        raise NotFound("session not found")
    args = load(ReceiptsQuery(), request.args)
    page = services().turns.receipts(session_id, args["after"], args["limit"])
    return jsonify({"receipts": [receipt_body(found) for found in page],
                    "next_after": page[-1].turn if page else args["after"]}), 200


@blueprint.get("/v1/api/admin/memories/<memory_id>/turns")
@authorized("read", admin=True)
def turns_showing(memory_id: str) -> tuple[Response, int]:
    """The newest turns, in any session, whose block held this memory: what it was shown to, and when."""
    found = services().turns.receipts_showing(memory_id, load(MemoryTurnsQuery(), request.args)["limit"])
    return jsonify({"receipts": [receipt_body(receipt) for receipt in found]}), 200


def turn_body(turn: Turn) -> dict[str, Any]:
    return {"turn_id": turn.turn_id, "turn": turn.turn, "position": turn.position,
            "memory_enabled": turn.memory_enabled, "placement": turn.placement, "block": turn.block,
            "hint": turn.hint, "system_message": turn.system_message, "tail_message": turn.tail_message,
            "items": [_item(item) for item in turn.items], "in_scope": turn.in_scope,
            "candidates": turn.candidates, "nudges": [_nudge(nudge) for nudge in turn.nudges],
            "receipt_id": turn.receipt_id, "degraded": turn.degraded, "dropped": turn.dropped,
            "block_sha256": turn.block_sha256, "system_sha256": turn.system_sha256, "replayed": turn.replayed}


def receipt_body(receipt: TurnReceipt) -> dict[str, Any]:
    return {"receipt_id": receipt.receipt_id, "session_id": receipt.session_id, "turn_id": receipt.turn_id,
            "turn": receipt.turn, "created": receipt.created, "position": receipt.position,
            "placement": receipt.placement, "memory_enabled": receipt.memory_enabled,
            "tool_visible": receipt.tool_visible, "in_scope": receipt.in_scope, "candidates": receipt.candidates,
            "items": [_item(item) for item in receipt.items], "nudges": [_nudge(nudge) for nudge in receipt.nudges],
            "degraded": receipt.degraded, "dropped": receipt.dropped, "block": receipt.block,
            "withheld": receipt.withheld, "hint": receipt.hint, "block_sha256": receipt.block_sha256,
            "block_matches": receipt.block_matches, "system_sha256": receipt.system_sha256}


def _item(item: Item) -> dict[str, Any]:
    return {"memory_id": item.memory_id, "name": item.name, "type": item.type, "scope": item.scope,
            "score": item.score, "position": item.position}


def _nudge(nudge: Nudge) -> dict[str, str]:
    return {"type": nudge.type, "text": nudge.text, "deliver": nudge.deliver}
