"""The Flask application factory and its cross-cutting concerns.

Every error, routing and body-size errors included, answers
``{"error": message}``; every request leaves one JSON log line. A database
that cannot be used just now (down, restarting, out of connections) is a 503
with ``Retry-After``, which clients retry; a 500 is a storage failure.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

from flask import Flask, Response, g, jsonify, request
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.routing import PathConverter

from api import admin, console, health, identities, memories, projects, sessions, turns, workstreams
from api.consistency import waiters_for
from api.context import metrics
from api.metrics import Metrics
from api.openapi import build_openapi
from api.preconditions import etag
from memoryd.app.services import Services
from memoryd.kernel.errors import DatabaseUnavailable, MemorydError, Refused, VersionMismatch
from memoryd.kernel.text import checked_text
from memoryd.storage.db import out_of_reach, unavailable

access_log = logging.getLogger("memoryd.access")
error_log = logging.getLogger("memoryd.errors")
REQUEST_ID_HEADER = "X-Request-Id"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUEST_ID = re.compile(r"[A-Za-z0-9][\w.:-]{0,127}", re.ASCII)  # a client's id is kept only in this form
STORAGE_FAILURES = {  # what a failed write says; reads say "Memory storage unavailable"
    "memories.save": "Failed to save memory",
    "memories.delete": "Failed to delete memory",
    "admin.delete": "Failed to delete memory",
}


def create_app(services: Services) -> Flask:
    """The Flask application serving ``services`` (the entry points build them: ``memoryd serve``, ``api.wsgi``)."""
    config = services.config
    app = Flask("memoryd")
    app.url_map.converters["anything"] = AnyText
    app.config["MAX_CONTENT_LENGTH"] = config.server.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["memoryd"] = services
    app.extensions["memoryd.waiters"] = waiters_for(config.server.threads)
    app.extensions["memoryd.metrics"] = Metrics(services)
    app.register_blueprint(memories.blueprint)
    app.register_blueprint(admin.blueprint)
    app.register_blueprint(health.blueprint)
    app.register_blueprint(console.blueprint)
    app.register_blueprint(identities.blueprint)
    app.register_blueprint(projects.blueprint)
    app.register_blueprint(sessions.blueprint)
    app.register_blueprint(turns.blueprint)
    app.register_blueprint(workstreams.blueprint)
    openapi = build_openapi()
    app.add_url_rule("/v1/api/openapi.json", "openapi", lambda: jsonify(openapi))
    _register_error_handlers(app, config.storage.database_url)
    app.before_request(_start_request)
    app.before_request(_check_url_text)
    app.after_request(_log_request)
    return app


class AnyText(PathConverter):
    """A path segment that may hold any character, a newline included, so the handler judges the name."""

    regex = "[^/](?s:.)*?"


def _register_error_handlers(app: Flask, database_url: str) -> None:
    def error(message: str, status: int) -> tuple[Response, int]:
        return jsonify({"error": message}), status

    @app.errorhandler(MemorydError)
    def domain_error(exc: MemorydError) -> tuple[Response, int]:
        if isinstance(exc, VersionMismatch):  # the version to read again, in the body and as the ETag
            response = jsonify({"error": exc.message, "current_version": exc.current})
            if exc.current is not None:
                response.headers["ETag"] = etag(exc.current)
            return response, exc.status
        response, status = error(exc.message, exc.status)
        if isinstance(exc, Refused):  # a known credential refused: why, for the operator to act on
            response = jsonify({"error": exc.message, "reason": exc.reason})
        if exc.code is not None:
            response = jsonify({"error": exc.message, "code": exc.code})
        if exc.retry_after is not None:
            response.headers["Retry-After"] = str(exc.retry_after)
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="memoryd"'
        return response, status

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(exc: RequestEntityTooLarge) -> tuple[Response, int]:
        return error(f"Request body too large (max {app.config['MAX_CONTENT_LENGTH']} bytes)", 413)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        message = f"{exc.name}: {request.method} {request.path}" if status in (404, 405) else str(exc.description)
        response, _ = error(message, status)
        for name, value in exc.get_headers():
            if name.lower() != "content-type":  # keeps Allow on a 405
                response.headers[name] = value
        return response, status

    @app.errorhandler(SQLAlchemyError)
    def storage_error(exc: SQLAlchemyError) -> tuple[Response, int]:
        if out_of_reach(exc):
            cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            error_log.warning("database unavailable on %s %s: %s", request.method, request.path,
                              unavailable(database_url, cause).message)  # the URL's password masked
            return domain_error(DatabaseUnavailable("the database is unavailable just now; retry shortly"))
        error_log.exception("storage failure on %s %s", request.method, request.path)
        return error(STORAGE_FAILURES.get(request.endpoint or "", "Memory storage unavailable"), 500)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> tuple[Response, int]:
        error_log.exception("unhandled error on %s %s", request.method, request.path)
        return error("Internal server error", 500)


def _start_request() -> None:
    g.started = time.perf_counter()
    supplied = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = supplied if REQUEST_ID.fullmatch(supplied) else uuid.uuid4().hex


def _check_url_text() -> None:
    """Path and query values are storable text (NUL arrives as ``%00``); else a 400 naming them."""
    for name, value in (request.view_args or {}).items():
        checked_text(str(value), name)
    for name, value in request.args.items(multi=True):
        checked_text(name, "a query parameter name")
        checked_text(value, name)


def _log_request(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = g.get("request_id", "")
    principal = g.get("principal")
    seconds = time.perf_counter() - g.get("started", time.perf_counter())
    method = request.method if request.method in HTTP_METHODS else "other"  # a client must not mint label values
    try:
        metrics().observe_request(request.endpoint or "unmatched", method, response.status_code, seconds)
    except Exception:  # counting must never fail an answer (a write may already have committed)
        error_log.exception("could not count %s %s in the metrics", request.method, request.path)
    access_log.info(json.dumps({
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "request_id": g.get("request_id", ""),
        "method": request.method,
        "path": request.path,
        "status": response.status_code,
        "duration_ms": round(seconds * 1000, 2),
        "user_id": principal.user_id if principal else "",
        "remote_addr": request.remote_addr or "",
    }))
    return response
