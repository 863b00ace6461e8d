"""Sign-in state, roles and response headers.

- Session cookie ``portalq_session``: an itsdangerous-signed random token (HttpOnly,
  SameSite=Strict); the session itself is a row (``jobs.admin.users``) that ends when
  idle longer than ``PORTALQ_CONSOLE_IDLE_MINUTES`` (time from ``jobs.clock``).
- CSRF: asgi-csrf (a signed double-submit token, cookie ``csrftoken`` + form field) on every
  POST, sign-in included; SameSite=Strict on both cookies as well. Signed in, the token is
  derived from the session (``SessionCsrf``): another session's token is refused, even
  planted in the cookie too. A state-changing request whose Origin (or, without one, its
  Referer) is not the console's own is refused before anything reads it (``SameOrigin``).
- Every response: a strict Content-Security-Policy (scripts and styles only from the
  console's own /static files; no inline script or style), no framing, a Referer only to
  the console itself (a POST then carries its true Origin: under no-referrer Chromium sends
  `Origin: null`). The trace viewer's files alone (``/trace-viewer/``) carry a policy of
  their own (``viewer_headers``): Playwright's viewer cannot run under the strict one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from asgi_csrf import DEFAULT_COOKIE_NAME, DEFAULT_SIGNING_NAMESPACE, cookies_from_scope
from itsdangerous import BadSignature, TimestampSigner, URLSafeSerializer
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from portalq.jobs.admin.users import User

COOKIE = "portalq_session"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def viewer_headers(script_hashes: Iterable[str]) -> list[tuple[bytes, bytes]]:
    """The Content-Security-Policy of the trace viewer's files (``/trace-viewer/`` only;
    every other response keeps ``CSP``). The viewer is Playwright's own web app, which
    the console's policy would stop from running. What it needs beyond ``CSP``, and why:

    - ``worker-src 'self'``: it registers a service worker that unpacks the trace;
    - ``frame-src 'self' data:``: it shows DOM snapshots in frames (same-origin pages the
      service worker builds, with their own policy: a script nonce, no objects) and a
      ``data:`` blank page between them (an opaque origin: it cannot reach the console);
    - ``style-src 'unsafe-inline'``: React and CodeMirror set style attributes and
      elements (styles only: scripts stay the viewer's own files plus the hashes of its
      page's inline scripts, so no injected text can run);
    - ``img-src data: blob:``: screencast frames and icons drawn from the trace;
    - ``font-src``/``manifest-src 'self'``: its icon font and web manifest.

    Connections stay same-origin (the trace zip comes from the console's artifact route),
    nothing may frame it, and it posts no form."""
    csp = ("default-src 'none'; "
           f"script-src 'self' {' '.join(script_hashes)}; "
           "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self'; "
           "connect-src 'self'; worker-src 'self'; frame-src 'self' data:; "
           "manifest-src 'self'; form-action 'none'; frame-ancestors 'none'; "
           "base-uri 'none'")
    return [(b"content-security-policy", csp.encode())]


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


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _netloc(scheme: str, netloc: str) -> str:
    """host[:port] without the scheme's default port, lower case."""
    netloc = netloc.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme, "")
    return netloc[: -len(default)] if default and netloc.endswith(default) else netloc


class SameOrigin:
    """Refuses (403, nothing read or written) a state-changing request that names another
    origin: its Origin header, else its Referer, must be the console's own -- the Host the
    request was sent to, or ``PORTALQ_CONSOLE_URL`` behind a proxy that rewrites Host. A
    request naming neither (a script, curl) is left to the CSRF token; a browser always
    sends Origin on a cross-origin POST, and ``Origin: null`` is never ours."""

    def __init__(self, app: ASGIApp, origins: Iterable[str] = ()) -> None:
        self.app = app
        self.origins = {_netloc(u.scheme, u.netloc) for u in map(urlsplit, origins)
                        if u.scheme in ("http", "https") and u.netloc}

    def ours(self, source: str, host: str) -> bool:
        parts = urlsplit(source)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False   # "null" (an opaque origin: sandboxed page, file:, data:)
        netloc = _netloc(parts.scheme, parts.netloc)
        return netloc in self.origins or netloc in (_netloc("http", host),
                                                    _netloc("https", host))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            headers = Headers(scope=scope)
            source = headers.get("origin")
            if source is None:
                source = headers.get("referer")
            if source is not None and not self.ours(source, headers.get("host", "")):
                refused = PlainTextResponse("Refused: this request came from another origin "
                                            "than the console's own; nothing was done.", 403)
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SessionCsrf:
    """Binds the CSRF token to the signed-in session: the token is derived from the session
    (so it is known only to whoever holds the session cookie), put in the forms and the
    ``csrftoken`` cookie in place of asgi-csrf's random one; a write whose token (which
    asgi-csrf has matched with the cookie) is not this session's is refused (403). Signed
    out (the sign-in form), asgi-csrf's double-submit token alone applies."""

    def __init__(self, app: ASGIApp, secret: str, secure: bool) -> None:
        self.app, self.secure = app, secure
        # asgi-csrf's own serializer, so the token stays valid in its eyes
        self.serializer = URLSafeSerializer(derive(secret, "csrf"))
        self.key = derive(secret, "csrf-session").encode()

    def bound(self, session: str) -> str:
        value = hmac.new(self.key, session.encode(), hashlib.sha256).hexdigest()[:32]
        return str(self.serializer.dumps(value, DEFAULT_SIGNING_NAMESPACE))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = (scope.get("state") or {}).get("session_token") \
            if scope["type"] == "http" else None
        if not session:
            await self.app(scope, receive, send)
            return
        token = self.bound(session)
        cookie = cookies_from_scope(scope).get(DEFAULT_COOKIE_NAME, "")
        if scope["method"] not in SAFE_METHODS and not secrets.compare_digest(cookie, token):
            refused = PlainTextResponse("Refused: the form's security token is not of this "
                                        "session (reload the page and try again); nothing "
                                        "was done.", 403)
            await refused(scope, receive, send)
            return
        attrs = f"{DEFAULT_COOKIE_NAME}={token}; Path=/; SameSite=Strict" + (
            "; Secure" if self.secure else "")

        async def send_bound(message: Message) -> None:
            if message["type"] == "http.response.start" and cookie != token:
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"set-cookie", attrs.encode())]}
            await send(message)

        await self.app({**scope, "csrftoken": lambda: token}, receive, send_bound)


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
