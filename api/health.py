"""Liveness and readiness probes for load balancers and orchestrators, and metrics (no token needed)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from api.context import metrics, services
from api.metrics import CONTENT_TYPE
from memoryd.storage.vectors import VECTORS_PREFIX

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> tuple[Response, int]:
    """The process is up and serving requests."""
    return jsonify({"status": "ok"}), 200


@blueprint.get("/readyz")
def readyz() -> tuple[Response, int]:
    """The database answers, the search index is not being built, no projection is stopped on an event, and each
    is within ``server.ready_max_lag``. ``search`` says which analyzer the index uses and where it came from.
    ``degraded`` lists what is down while the service still serves: ``queue`` while Redis does not answer
    (writes project in the API process meanwhile), ``vectors`` while the semantic channel's vectors are stopped
    on an event or lag past ``ready_max_lag`` (memories without one are found by BM25 alone), and it stays
    ready. ``vectors`` (with the channel on) gives their projection's checkpoint and lag."""
    try:
        with services().database.read() as conn:
            conn.execute(text("SELECT 1"))
        head = services().store.head_position()
        lag = {p.name: head - services().projector.checkpoint(p.name) for p in services().projector.projections}
        faults = services().projector.faults(everywhere=True)
        search_fault = services().search.current_fault()
        vectors = services().vectors
        vectors_at = vectors.checkpoint() if vectors is not None else 0
    except SQLAlchemyError as error:
        return jsonify({"status": "unavailable", "error": f"database unreachable: {type(error).__name__}"}), 503
    if search_fault is not None:
        faults.append(search_fault)
    limit = services().config.server.ready_max_lag
    search = services().search
    body: dict[str, object] = {"status": "ready", "head": head, "lag": lag, "max_lag": limit,
                               "search": {"analyzer": search.analyzer.identity, "index": search.origin},
                               "degraded": (down := degraded())}
    vectors_stopped = [fault for fault in faults if fault.projection.startswith(VECTORS_PREFIX)]
    faults = [fault for fault in faults if fault not in vectors_stopped]  # a lagging channel is degraded, no more
    if vectors is not None:
        behind = head - vectors_at
        body["vectors"] = {"projection": vectors.name, "checkpoint": vectors_at, "lag": behind}
        if behind > limit or any(fault.projection == vectors.name for fault in vectors_stopped):
            down.append("vectors")
    if search.building():
        body["status"] = "starting"
    elif faults:
        body["status"] = "stopped"
        body["stopped"] = {fault.projection: {"position": fault.position, "event_type": fault.event_type,
                                              "error": fault.error} for fault in faults}
    elif any(behind > limit for behind in lag.values()):
        body["status"] = "lagging"
    return jsonify(body), 200 if body["status"] == "ready" else 503


def degraded() -> list[str]:
    """What is down while the service serves on without it (``memoryd.kernel.queue_health``)."""
    health = services().queue_health
    return ["queue"] if health is not None and not health.check() else []


@blueprint.get("/metrics")
def prometheus_metrics() -> Response:
    """Prometheus' text format: requests, turns, projections, the search index and the queue (``api.metrics``)."""
    return Response(metrics().exposition(), 200, mimetype=None, content_type=CONTENT_TYPE)
