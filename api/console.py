"""The web console at ``/console``: static files from the package, served under a strict policy.

The page is plain JavaScript modules calling the same JSON API as every client, with the operator's token
as a bearer header. No inline script, no ``eval``, nothing from another origin (the Content-Security-Policy
says so to the browser); each file is revalidated by its ETag, so an upgraded memoryd serves its own page.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, redirect, send_from_directory
from werkzeug.wrappers import Response as BaseResponse

blueprint = Blueprint("console", __name__)

FILES = Path(__file__).with_name("console_files")
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # kept, but asked again (a 304 by ETag) so an upgrade shows at once
}


@blueprint.get("/console")
def root() -> BaseResponse:
    return redirect("/console/", 308)


@blueprint.get("/console/")
def index() -> Response:
    return _served("index.html")


@blueprint.get("/console/<path:name>")
def file(name: str) -> Response:
    return _served(name)


def _served(name: str) -> Response:
    response = send_from_directory(FILES, name, max_age=0)  # a name outside the folder is a 404
    response.headers.update(HEADERS)
    return response
