"""Pieces the BC Registries and CRTC stand-ins share: page layout, the guard that applies
opening hours and faults, cookie sessions, the "answer lost" connection drop, PDFs.

Pages carry stable markers a flow can recognise, like a real portal's distinctive texts:
``#portal-closed``, ``#maintenance``, ``#system-error`` (``data-code``), ``#session-expired``;
step pages show a progress list whose current step is ``<li class="step active"
aria-current="step">``; form errors are ``<div role="alert" class="error" data-code=...>``.
"""

from __future__ import annotations

import asyncio
import html
import secrets
from collections.abc import Awaitable, Callable, Iterable
from datetime import date
from typing import Any

from fpdf import FPDF
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from portals.standin.common import PortalState

Handler = Callable[[Request], Awaitable[Response]]

_CSS = """
body{font-family:sans-serif;margin:0}header{background:#003366;color:#fff;padding:.6em 1em}
main{padding:1em 2em;max-width:52em}.error{color:#a00;border:1px solid #a00;padding:.5em}
ol.progress{display:flex;gap:1em;list-style:none;padding:0}
ol.progress li{padding:.3em .6em;border-bottom:3px solid #ccc}
ol.progress li.done{border-color:#2e8540}
ol.progress li.active{border-color:#fcba19;font-weight:bold}
.field,.choice{margin:.4em 0}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(request: Request, path: str) -> str:
    """``path`` under the prefix the stand-in is mounted at (e.g. ``/bc``)."""
    return f"{request.scope.get('root_path', '')}{path}"


def progress(steps: Iterable[str], current: int, done: int) -> str:
    """The step indicator: ``current`` is 1-based; steps before ``done`` are complete."""
    items = []
    for i, label in enumerate(steps, start=1):
        cls = "step" + (" active" if i == current else "") + (" done" if i <= done else "")
        aria = ' aria-current="step"' if i == current else ""
        items.append(f'<li class="{cls}"{aria}>{esc(label)}</li>')
    return f'<ol class="progress" aria-label="Progress">{"".join(items)}</ol>'


def page(brand: str, title: str, body: str, *, status: int = 200, top: str = "",
         cookie: tuple[str, str] | None = None) -> HTMLResponse:
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} - "
           f"{esc(brand)}</title><style>{_CSS}</style></head><body><header>{esc(brand)}"
           f"</header><main>{top}<h1>{esc(title)}</h1>{body}</main></body></html>")
    response = HTMLResponse(doc, status_code=status)
    if cookie:
        response.set_cookie(cookie[0], cookie[1], httponly=True, samesite="lax")
    return response


def alert(code: str, message: str) -> str:
    return f'<div role="alert" class="error" data-code="{esc(code)}">{esc(message)}</div>'


def field(label: str, name: str, value: Any = "", *, kind: str = "text") -> str:
    return (f'<div class="field"><label for="f-{name}">{esc(label)}</label> <input '
            f'type="{kind}" id="f-{name}" name="{name}" value="{esc(value)}"></div>')


def checkbox(label: str, name: str, value: str = "on", checked: bool = False,
             kind: str = "checkbox") -> str:
    ident = f"f-{name}-{value}"
    mark = " checked" if checked else ""
    return (f'<div class="choice"><input type="{kind}" id="{ident}" name="{name}" '
            f'value="{esc(value)}"{mark}> <label for="{ident}">{esc(label)}</label></div>')


def radio(label: str, name: str, value: str, current: Any) -> str:
    return checkbox(label, name, value, current == value, kind="radio")


def select(label: str, name: str, options: dict[str, str], current: Any = None) -> str:
    opts = "".join(f'<option value="{esc(k)}"{" selected" if k == current else ""}>{esc(v)}'
                   "</option>" for k, v in options.items())
    return (f'<div class="field"><label for="f-{name}">{esc(label)}</label> '
            f'<select id="f-{name}" name="{name}">{opts}</select></div>')


def form(action: str, inner: str, button: str, state: PortalState, *, renamed: str,
         multipart: bool = False) -> str:
    """A POST form whose submit button is ``button`` — or ``renamed`` while the
    ``changed_selector`` fault is on; the ``dialog`` fault adds a confirm() on submit
    (dismissing it, as a browser does by default with no handler, blocks the form)."""
    enctype = ' enctype="multipart/form-data"' if multipart else ""
    confirm = ""
    if state.faults.dialog:
        confirm = (' onsubmit="return confirm(\'Your session will time out after 30 minutes'
                   ' of inactivity. Continue?\')"')
    if state.faults.changed_selector:
        btn = f'<button type="submit" class="btn-next" data-v="2">{esc(renamed)}</button>'
    else:
        btn = f'<button type="submit" class="btn-primary">{esc(button)}</button>'
    return f'<form method="post" action="{action}"{enctype}{confirm}>{inner}{btn}</form>'


def guard(state: PortalState, brand: str, hours_note: str) -> Callable[[Handler], Handler]:
    """Every page: optional slowness, then the closed notice or the maintenance page."""

    def wrap(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if state.faults.slow_ms:
                await asyncio.sleep(state.faults.slow_ms / 1000)  # simulated latency
            if not state.is_open():
                return page(brand, "Service not available", (
                    '<p id="portal-closed">This service is not available at this time. '
                    f"{esc(hours_note)}</p>"))
            if state.faults.maintenance:
                return page(brand, "Scheduled maintenance", (
                    '<p id="maintenance">The system is down for scheduled maintenance. '
                    "Please try again later.</p>"), status=503)
            return await handler(request)

        return guarded

    return wrap


def system_error(brand: str, code: str) -> HTMLResponse:
    """The page for an injected error: ``500``-style codes answer with that HTTP status,
    anything else (``SYSTEM_UNAVAILABLE``) with a 200 error page."""
    status = int(code) if code.isdigit() and 500 <= int(code) <= 599 else 200
    return page(brand, "System error", (
        f'<p id="system-error" data-code="{esc(code)}">We are unable to process your request '
        f"at this time ({esc(code)}). Please try again later.</p>"), status=status)


def session_expired(brand: str, restart: str) -> HTMLResponse:
    return page(brand, "Session expired", (
        '<p id="session-expired">Your session has expired. Your information was not saved.</p>'
        f'<p><a href="{restart}">Start again</a></p>'))


class Sessions:
    """Cookie sessions kept in ``state.sessions`` (emptied by ``/_reset``)."""

    def __init__(self, state: PortalState, cookie: str) -> None:
        self.state = state
        self.cookie = cookie

    def new(self, **data: Any) -> tuple[str, dict[str, Any]]:
        sid = secrets.token_urlsafe(16)
        session = {"steps": 0, **data}
        with self.state.lock:
            self.state.sessions[sid] = session
        return sid, session

    def get(self, request: Request) -> dict[str, Any] | None:
        return self.state.sessions.get(request.cookies.get(self.cookie, ""))

    def expire_due(self, request: Request, session: dict[str, Any]) -> bool:
        """The ``expire_session`` fault (one-shot): a session past its first step is dropped."""
        with self.state.lock:
            if self.state.faults.expire_session and session["steps"] >= 1:
                self.state.faults.expire_session = False
                self.state.sessions.pop(request.cookies.get(self.cookie, ""), None)
                return True
        return False


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def make_pdf(title: str, lines: Iterable[str], *, issuer: str, issued: date) -> bytes:
    """A small real PDF document (a certificate, a confirmation letter)."""
    pdf = FPDF(format="Letter")
    pdf.set_title(_latin1(title))
    pdf.set_author(_latin1(issuer))
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 10, _latin1(issuer), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "B", 14)
    pdf.multi_cell(0, 10, _latin1(title), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 7, f"Date: {issued.isoformat()}", new_x="LMARGIN", new_y="NEXT")
    for line in lines:
        pdf.multi_cell(0, 7, _latin1(line), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def pdf_response(data: bytes, filename: str) -> Response:
    return Response(data, media_type="application/pdf",
                    headers={"content-disposition": f'inline; filename="{filename}"'})
