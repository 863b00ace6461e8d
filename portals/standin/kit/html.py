"""Pages of the stand-ins: escaping, links, the two page families and the page guard.

Two families, as on the real sites: the **Canadian registries** (BC Registries, CRTC:
:func:`page`) and the **US filing systems** (IRS EIN Assistant, Delaware ICIS:
:func:`layout`). Pages a flow classifies carry stable markers, like a real portal's
distinctive texts. Canadian: ``#portal-closed``, ``#maintenance``, ``#system-error``
(``data-code``), ``#session-expired``; a progress list whose current step is ``<li
class="step active" aria-current="step">``. US: a closed notice ``#notice`` (200, no form)
and a maintenance page (503).

Every page passes :func:`guard`: the ``slow_ms`` latency, then the family's gate (closed
notice or maintenance page), then the handler.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from portalq.portals.standin.kit.state import PortalState

Handler = Callable[[Request], Awaitable[Response]]
Gate = Callable[[], Response | None]


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def root(request: Request) -> str:
    """The mount prefix (e.g. "/irs") for building links."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def url(request: Request, path: str) -> str:
    """``path`` under the prefix the stand-in is mounted at (e.g. ``/bc``)."""
    return f"{request.scope.get('root_path', '')}{path}"


async def delay(state: PortalState) -> None:
    """The ``slow_ms`` fault: simulated latency before every page."""
    if state.faults.slow_ms > 0:
        await asyncio.sleep(state.faults.slow_ms / 1000)


def guard(state: PortalState, gate: Gate) -> Callable[[Handler], Handler]:
    """Every page: latency, then ``gate``'s page if it has one, else the handler's."""

    def wrap(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            await delay(state)
            if (stop := gate()) is not None:
                return stop
            return await handler(request)

        return guarded

    return wrap


# ---- the Canadian registries (BC Registries, CRTC) -------------------------------------

_CA_CSS = """
body{font-family:sans-serif;margin:0}header{background:#003366;color:#fff;padding:.6em 1em}
main{padding:1em 2em;max-width:52em}.error{color:#a00;border:1px solid #a00;padding:.5em}
ol.progress{display:flex;gap:1em;list-style:none;padding:0}
ol.progress li{padding:.3em .6em;border-bottom:3px solid #ccc}
ol.progress li.done{border-color:#2e8540}
ol.progress li.active{border-color:#fcba19;font-weight:bold}
.field,.choice{margin:.4em 0}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em}
"""


def page(brand: str, title: str, body: str, *, status: int = 200, top: str = "",
         cookie: tuple[str, str] | None = None) -> HTMLResponse:
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} - "
           f"{esc(brand)}</title><style>{_CA_CSS}</style></head><body><header>{esc(brand)}"
           f"</header><main>{top}<h1>{esc(title)}</h1>{body}</main></body></html>")
    response = HTMLResponse(doc, status_code=status)
    if cookie:
        response.set_cookie(cookie[0], cookie[1], httponly=True, samesite="lax")
    return response


def ca_gate(state: PortalState, brand: str, hours_note: str) -> Gate:
    """The closed notice (``#portal-closed``), else the maintenance page (503)."""

    def gate() -> Response | None:
        if not state.is_open():
            return page(brand, "Service not available", (
                '<p id="portal-closed">This service is not available at this time. '
                f"{esc(hours_note)}</p>"))
        if state.faults.maintenance:
            return page(brand, "Scheduled maintenance", (
                '<p id="maintenance">The system is down for scheduled maintenance. '
                "Please try again later.</p>"), status=503)
        return None

    return gate


def progress(steps: Iterable[str], current: int, done: int) -> str:
    """The step indicator: ``current`` is 1-based; steps before ``done`` are complete."""
    items = []
    for i, label in enumerate(steps, start=1):
        cls = "step" + (" active" if i == current else "") + (" done" if i <= done else "")
        aria = ' aria-current="step"' if i == current else ""
        items.append(f'<li class="{cls}"{aria}>{esc(label)}</li>')
    return f'<ol class="progress" aria-label="Progress">{"".join(items)}</ol>'


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


# ---- the US filing systems (IRS EIN Assistant, Delaware ICIS) --------------------------

_US_CSS = """
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
           f"<style>{_US_CSS}</style></head><body><header>{esc(title)}</header>"
           f"<main>{body}</main>{f'<script>{script}</script>' if script else ''}</body></html>")
    return HTMLResponse(doc, status_code=status, headers=headers)


def us_maintenance(title: str, text: bool = True) -> HTMLResponse:
    body = ("<h1>Scheduled maintenance</h1><p>This system is undergoing scheduled maintenance. "
            "Please try again later.</p>") if text else "<h1>Scheduled maintenance</h1>"
    return layout(title, body, status=503)


def us_maintenance_gate(state: PortalState, title: str) -> Gate:
    """Documents stay downloadable out of hours, not during maintenance (a bare 503)."""
    return lambda: us_maintenance(title, text=False) if state.faults.maintenance else None


def us_gate(state: PortalState, title: str, closed_text: str) -> Gate:
    """The maintenance page (503), else the closed notice (``#notice``, 200, no form)."""

    def gate() -> Response | None:
        if state.faults.maintenance:
            return us_maintenance(title)
        if not state.is_open():
            return layout(title, f"<h1>{esc(title)}</h1><p id=notice>{esc(closed_text)}</p>")
        return None

    return gate
