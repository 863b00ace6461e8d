"""Sign-in state, roles and response headers.

- Session cookie ``portalq_session``: an itsdangerous-signed random token (HttpOnly,
  SameSite=Strict); the session itself is a row (``jobs.admin.users``) that ends when
  idle longer than ``PORTALQ_CONSOLE_IDLE_MINUTES`` (time from ``jobs.clock``).
- CSRF: asgi-csrf (a signed double-submit token, cookie ``csrftoken`` + form field) on every
  POST, sign-in included; SameSite=Strict on both cookies as well.
- Every response: a strict Content-Security-Policy (scripts and styles only from the
  console's own /static files; no inline script or style), no framing, no referrer.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from itsdangerous import BadSignature, TimestampSigner
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from portalq.jobs.admin.users import User

COOKIE = "portalq_session"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def derive(secret: str, purpose: str) -> str:
    """A key for one purpose (cookies, CSRF) from the console's secret."""
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).hexdigest()


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                names = {k.lower() for k, _ in headers}
                headers += [h for h in HEADERS if h[0] not in names]
                # the server's own time to the response (bench/console_bench.py reads it)
                took = (time.perf_counter() - started) * 1000
                headers.append((b"server-timing", f"app;dur={took:.2f}".encode()))
                if b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Sessions:
    """Cookie signing and the per-request user lookup."""

    def __init__(self, secret: str, idle: timedelta, max_age: timedelta, secure: bool) -> None:
        self.signer = TimestampSigner(derive(secret, "session"), salt="portalq-console")
        self.idle, self.max_age, self.secure = idle, max_age, secure

    def cookie_value(self, token: str) -> str:
        return self.signer.sign(token).decode()

    def token(self, request: Request) -> str | None:
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            return self.signer.unsign(raw, max_age=int(self.max_age.total_seconds())).decode()
        except BadSignature:
            return None

    def set_cookie(self, response: Any, token: str) -> None:
        response.set_cookie(COOKIE, self.cookie_value(token), httponly=True, samesite="strict",
                            secure=self.secure, path="/")

    def clear_cookie(self, response: Any) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                               secure=self.secure)


class SignInRequired(Exception):
    def __init__(self, next_url: str, reason: str = "") -> None:
        self.next_url, self.reason = next_url, reason


def require(request: Request, role: str = "viewer") -> User:
    """The signed-in user, at least ``role``; else sign-in (no session) or 403."""
    user: User | None = request.state.user
    if user is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInRequired(quote(target, safe="/?=&"), getattr(request.state,
                                                                 "signed_out", ""))
    if not user.can(role):
        raise HTTPException(403, f"this needs the {role} role (you are {user.role})")
    return user
