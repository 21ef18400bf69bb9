"""The turn routes: what an agent runtime calls once per turn, and the receipts of what it was given.

``POST /v1/api/sessions/{id}/turns`` composes the turn (the session's own
token, as for the memory tool); ``POST .../signals`` answers the nudges a
tool-loop event earns; ``GET .../turns/{turn_id}`` is one receipt, and
``GET /v1/api/admin/sessions/{id}/turns`` pages a session's receipts for
auditors. ``Idempotency-Key`` names the turn when the body has no
``turn_id``: a retry replays the recorded turn.
"""

from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from api.consistency import requested_min_position
from api.context import authorized, json_object, metrics, services
from api.idempotency import KEY_HEADER, checked_key
from api.schemas import ReceiptsQuery, load
from api.sessions import session_authorized
from memoryd.app.turn import Signal, TurnRequest
from memoryd.errors import NotFound, ValidationError

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
    return jsonify(turn.to_dict()), 200


@blueprint.post("/v1/api/sessions/<session_id>/signals")
@session_authorized
def signal(session_id: str) -> tuple[Response, int]:
    nudges = services().turns.signal(g.session, Signal.parse(json_object()))
    return jsonify({"nudges": [nudge.to_dict() for nudge in nudges]}), 200


@blueprint.get("/v1/api/sessions/<session_id>/turns/<anything:turn_id>")
@session_authorized
def receipt(session_id: str, turn_id: str) -> tuple[Response, int]:
    found = services().turns.receipt(g.session, turn_id)
    if found is None:
        raise NotFound("no turn with this turn_id in this session")
    return jsonify(found), 200


@blueprint.get("/v1/api/admin/sessions/<session_id>/turns")
@authorized("read", admin=True)
def receipts(session_id: str) -> tuple[Response, int]:
    if services().sessions.get(session_id) is None:
        raise NotFound("session not found")
    args = load(ReceiptsQuery(), request.args)
    page = services().turns.receipts(session_id, args["after"], args["limit"])
    return jsonify({"receipts": page, "next_after": page[-1]["turn"] if page else args["after"]}), 200
