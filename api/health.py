"""Liveness and readiness probes for load balancers and orchestrators (no token needed)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from api.context import services

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> tuple[Response, int]:
    """The process is up and serving requests."""
    return jsonify({"status": "ok"}), 200


@blueprint.get("/readyz")
def readyz() -> tuple[Response, int]:
    """The database answers and every projection is within ``server.ready_max_lag`` of the log."""
    try:
        with services().database.read() as conn:
            conn.execute(text("SELECT 1"))
        head = services().store.head_position()
        lag = {p.name: head - services().projector.checkpoint(p.name) for p in services().projector.projections}
    except SQLAlchemyError as error:
        return jsonify({"status": "unavailable", "error": f"database unreachable: {type(error).__name__}"}), 503
    limit = services().config.server.ready_max_lag
    ready = all(behind <= limit for behind in lag.values())
    body = {"status": "ready" if ready else "lagging", "head": head, "lag": lag, "max_lag": limit}
    return jsonify(body), 200 if ready else 503
