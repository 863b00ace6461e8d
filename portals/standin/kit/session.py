"""Cookie sessions of a stand-in, kept in ``PortalState.sessions`` (emptied by ``/_reset``).

One kind for every portal: a session is a dict with ``steps`` (how far the visitor got)
and ``last`` (when it was last used, on the jobs clock) plus whatever the portal keeps.
With ``idle`` set, a session unused for longer is gone (IRS: 15 min, Delaware: 30 min).
The ``expire_session`` fault (one-shot) drops a session that is past its first step.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from portalq.jobs import clock
from portalq.portals.standin.kit.state import PortalState


class Sessions:
    def __init__(self, state: PortalState, cookie: str, idle: timedelta | None = None) -> None:
        self.state, self.cookie, self.idle = state, cookie, idle

    def new(self, response: Response | None = None, *, path: str = "/",
            **data: Any) -> tuple[str, dict[str, Any]]:
        """A new session holding ``data``; its cookie is set on ``response`` if given."""
        sid = secrets.token_urlsafe(18)
        session: dict[str, Any] = {"steps": 0, "last": clock.now(), **data}
        with self.state.lock:
            self.state.sessions[sid] = session
        if response is not None:
            self.attach(response, sid, path)
        return sid, session

    def attach(self, response: Response, sid: str, path: str = "/") -> None:
        response.set_cookie(self.cookie, sid, path=path or "/", httponly=True, samesite="lax")

    def get(self, request: Request) -> dict[str, Any] | None:
        """The live session (touched), or None if absent or idle too long (then deleted)."""
        sid = request.cookies.get(self.cookie, "")
        now = clock.now()
        with self.state.lock:
            session = self.state.sessions.get(sid)
            if session is None:
                return None
            if self.idle is not None and now - session["last"] > self.idle:
                del self.state.sessions[sid]
                return None
            session["last"] = now
            return session

    def expire_due(self, request: Request, session: dict[str, Any]) -> bool:
        """The ``expire_session`` fault (one-shot): a session past its first step is dropped."""
        with self.state.lock:
            if self.state.faults.expire_session and session["steps"] >= 1:
                self.state.faults.expire_session = False
                self.end(request)
                return True
        return False

    def current(self, request: Request) -> dict[str, Any] | None:
        """:meth:`get`, with the ``expire_session`` fault applied on every page."""
        session = self.get(request)
        if session is None or self.expire_due(request, session):
            return None
        return session

    def end(self, request: Request) -> None:
        self.state.sessions.pop(request.cookies.get(self.cookie, ""), None)
