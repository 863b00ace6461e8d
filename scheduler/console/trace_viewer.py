"""Playwright's trace viewer, served by the console under ``/trace-viewer/``.

The viewer is the static web app that ships inside the ``playwright`` package (the one
``playwright show-trace`` serves). A job page links an attempt's trace as
``/trace-viewer/index.html?trace=/artifacts/<id>``: the viewer's service worker fetches
the zip from the console (same origin, the session cookie with it, so the artifact route's
sign-in and role check apply) and unpacks it in the browser. Nothing leaves the console's
origin, and the URL names the artifact's id only.

Every file of the viewer needs a signed-in user, like every page. Its responses carry the
viewer's own Content-Security-Policy (``security.viewer_headers``): the console's policy
would stop the viewer from running at all (no frames, no fonts, no manifest).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
from pathlib import Path
from urllib.parse import quote

from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from portalq.scheduler.console.security import require, viewer_headers

PREFIX = "/trace-viewer"
#: where the playwright package keeps the viewer's build (1.4x to 1.5x+ keep it here)
_PARTS = ("driver", "package", "lib", "vite", "traceViewer")


def viewer_dir() -> Path | None:
    """The viewer's files in the installed playwright package, or None when this install
    has none (then the job page offers the trace as a download only). Found without
    importing playwright: the console never drives a browser."""
    spec = importlib.util.find_spec("playwright")
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root).joinpath(*_PARTS)
        if (folder / "index.html").is_file() and (folder / "sw.bundle.js").is_file():
            return folder
    return None


def inline_script_hashes(html: str) -> list[str]:
    """CSP hashes of the page's inline scripts (index.html has one: the notice shown when
    the viewer is opened from a file), so they run without allowing inline script."""
    out = []
    for body in re.findall(r"<script>(.*?)</script>", html, flags=re.S):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        out.append(f"'sha256-{digest}'")
    return out


def trace_link(artifact_id: int) -> str:
    """The viewer opening one trace artifact (a same-origin path: the id, nothing else)."""
    return f"{PREFIX}/index.html?trace={quote(f'/artifacts/{artifact_id}', safe='')}"


class Viewer:
    """The viewer's static files behind sign-in, with the viewer's headers."""

    def __init__(self, folder: Path) -> None:
        self.files = StaticFiles(directory=str(folder))
        html = (folder / "index.html").read_text(encoding="utf-8")
        self.headers = [*viewer_headers(inline_script_hashes(html)),
                        # revalidated (ETag) on every load, so a signed-out browser is
                        # sent to sign in rather than served from its cache
                        (b"cache-control", b"private, no-cache")]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        require(Request(scope))   # SignInRequired / 403: the console's handlers answer

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in self.headers}
                message = {**message, "headers": [
                    *[(k, v) for k, v in message.get("headers", []) if k.lower() not in names],
                    *self.headers]}
            await send(message)

        await self.files(scope, receive, with_headers)


def mount() -> list[Mount]:
    folder = viewer_dir()
    return [Mount(PREFIX, app=Viewer(folder), name="trace-viewer")] if folder else []

