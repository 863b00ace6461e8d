"""Shared pieces of the IRS and Delaware stand-ins: layout, closed/maintenance pages,
server-side sessions with idle timeout, the dropped-connection fault, small PDFs."""

from __future__ import annotations

import asyncio
import html
import secrets
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from jobs import clock
from portals.standin.common import PortalState

esc = html.escape

_CSS = """
body{font:14px sans-serif;margin:0;color:#1b1b1b}
header{background:#112e51;color:#fff;padding:8px 16px}
main{padding:16px;max-width:760px}.vh{position:absolute;width:1px;height:1px;overflow:hidden;
clip:rect(0 0 0 0);pointer-events:none;opacity:0}ol.progress{display:flex;gap:12px;padding:0;
list-style:none}ol.progress li{color:#777}ol.progress li.current{color:#000;font-weight:bold}
label{display:block;margin:4px 0;cursor:pointer}.radio-group label{border:1px solid #999;
padding:4px 8px;display:inline-block}.radio-group label.selected{background:#cde}
.btn{display:inline-block;background:#0071bc;color:#fff;padding:6px 16px;text-decoration:none;
margin-top:12px;border:0}.error{color:#b50909}fieldset{border:0;padding:0;margin:8px 0}
"""


def layout(title: str, body: str, *, status: int = 200, script: str = "",
           headers: dict[str, str] | None = None) -> HTMLResponse:
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
           f"<style>{_CSS}</style></head><body><header>{esc(title)}</header>"
           f"<main>{body}</main>{f'<script>{script}</script>' if script else ''}</body></html>")
    return HTMLResponse(doc, status_code=status, headers=headers)


async def delay(state: PortalState) -> None:
    if state.faults.slow_ms > 0:
        await asyncio.sleep(state.faults.slow_ms / 1000)


def gate(state: PortalState, title: str, closed_text: str) -> HTMLResponse | None:
    """The closed notice (200, no form) or the maintenance page (503), else None."""
    if state.faults.maintenance:
        return layout(title, "<h1>Scheduled maintenance</h1><p>This system is undergoing "
                      "scheduled maintenance. Please try again later.</p>", status=503)
    if not state.is_open():
        return layout(title, f"<h1>{esc(title)}</h1><p id=notice>{esc(closed_text)}</p>")
    return None


def dialog_script(state: PortalState) -> str:
    """With the ``dialog`` fault: an alert on load, and a confirm before Continue."""
    if not state.faults.dialog:
        return "const CONFIRM = () => true;"
    return ("window.addEventListener('load', () => alert('Notice: expect longer response "
            "times today.'));\nconst CONFIRM = () => confirm('Are you sure you want to "
            "continue? Changes cannot be undone.');")


def continue_button(state: PortalState, label: str = "Continue") -> str:
    """The Continue control (an <a role=button>), renamed by the ``changed_selector`` fault."""
    if state.faults.changed_selector and label == "Continue":
        return '<a href="#" role="button" class="btn go" aria-label="Proceed">Proceed</a>'
    return f'<a href="#" role="button" class="btn go" aria-label="{label}">{label}</a>'


# submits the form from the JS state (the <a role=button> is not a form control)
SUBMIT_JS = """document.querySelectorAll('a.go').forEach(a => a.addEventListener('click', ev => {
  ev.preventDefault(); if (!CONFIRM()) return; document.querySelector('form.step').submit(); }));
"""


class Sessions:
    """Server-side sessions in ``state.sessions`` with an idle timeout on the jobs clock."""

    def __init__(self, state: PortalState, cookie: str, idle: timedelta) -> None:
        self.state, self.cookie, self.idle = state, cookie, idle

    def new(self, response: Response, path: str) -> dict[str, Any]:
        sid = secrets.token_urlsafe(18)
        session: dict[str, Any] = {"last": clock.now(), "data": {}, "steps": 0}
        with self.state.lock:
            self.state.sessions[sid] = session
        response.set_cookie(self.cookie, sid, path=path or "/", httponly=True, samesite="lax")
        return session

    def current(self, request: Request) -> dict[str, Any] | None:
        """The live session (touched), or None if absent/expired (then it is deleted)."""
        sid = request.cookies.get(self.cookie, "")
        now = clock.now()
        with self.state.lock:
            session = self.state.sessions.get(sid)
            if session is None:
                return None
            expired = now - session["last"] > self.idle
            if self.state.faults.expire_session and session["steps"] >= 1:
                self.state.faults.expire_session = False  # one-shot
                expired = True
            if expired:
                del self.state.sessions[sid]
                return None
            session["last"] = now
            return session


def make_pdf(heading: Sequence[str], lines: Sequence[str]) -> bytes:
    """A small real PDF (fpdf2): bold heading lines, then body paragraphs."""
    from fpdf import FPDF

    def latin(text: str) -> str:
        return text.encode("latin-1", "replace").decode("latin-1")

    pdf = FPDF()
    pdf.set_title(latin(heading[0]) if heading else "document")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 13)
    for line in heading:
        pdf.cell(0, 7, latin(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "", 10)
    for line in lines:
        pdf.multi_cell(0, 5, latin(line), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(1)
    return bytes(pdf.output())


def pdf_response(data: bytes, name: str) -> Response:
    return Response(data, media_type="application/pdf",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def root(request: Request) -> str:
    """The mount prefix (e.g. "/irs") for building links."""
    return str(request.scope.get("root_path", "")).rstrip("/")
