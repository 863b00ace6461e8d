"""The console application: middleware (security headers, CSRF, the signed-in user), the
connection pool, the live hub, templates, and the routes of the page modules."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import asgi_csrf
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin import users as console_users
from portalq.jobs.db.pool import make_sync_pool
from portalq.jobs.errors import IllegalTransition, InputError, JobNotFound, PortalqError
from portalq.scheduler.config import Settings
from portalq.scheduler.console import (
    live_view,
    pages_admin,
    pages_jobs,
    pages_orders,
    pages_overview,
    pages_sso,
    trace_viewer,
)
from portalq.scheduler.console.live import Hub
from portalq.scheduler.console.oidc import Config
from portalq.scheduler.console.pages_needs import routes as needs_routes
from portalq.scheduler.console.pages_overview import Snapshots, live_fragment
from portalq.scheduler.console.security import (
    SameOrigin,
    SecurityHeaders,
    SessionCsrf,
    Sessions,
    SignInRequired,
    derive,
)
from portalq.scheduler.console.signing_key import ConsoleSettings, secret_key

HERE = Path(__file__).parent


def _fmt_time(value: Any, tz: str | None = None) -> str:
    if not isinstance(value, datetime):
        return "-" if value is None else str(value)
    if tz:
        return value.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


def to_json(value: Any) -> str:
    return json.dumps(value, default=_json_default, sort_keys=True, indent=2)


class Console:
    """What the routes share: settings, pool, sessions, templates, live hub."""

    def __init__(self, dsn: str, settings: ConsoleSettings, service: Settings) -> None:
        self.dsn, self.settings, self.service = dsn, settings, service
        self.pool = make_sync_pool(dsn)
        self.secret = secret_key(settings)
        self.sessions = Sessions(self.secret, timedelta(minutes=settings.idle_minutes),
                                 timedelta(hours=settings.max_session_hours),
                                 settings.secure_cookies)
        self.throttle = console_users.Throttle(
            settings.login_failures_per_name, settings.login_failures_per_ip,
            timedelta(minutes=settings.login_window_minutes))
        self.sso_label: str | None = None  # set when single sign-on is configured
        self.on_close: list[Callable[[], Awaitable[None]]] = []  # at shutdown
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        env = self.templates.env
        env.filters["t"] = _fmt_time
        env.filters["tojson_pretty"] = to_json
        # a job page links each trace into the viewer when this install ships one
        env.globals["trace_link"] = trace_viewer.trace_link if trace_viewer.viewer_dir() \
            else None
        self.hub = Hub(self, functools.partial(live_fragment, self))
        self.snapshots = Snapshots(self)

    @contextlib.contextmanager
    def db(self) -> Iterator[Any]:
        with self.pool.connection() as conn:
            yield conn

    def render(self, request: Request, name: str, status: int = 200, **context: Any,
               ) -> Response:
        token = request.scope.get("csrftoken")
        # a page for a path the user middleware skips (/static/) has no user on its state
        context.setdefault("user", getattr(request.state, "user", None))
        context.setdefault("sso_label", self.sso_label)
        context.setdefault("password_sign_in", self.settings.password_sign_in)
        if context["user"] is not None and "needs_you" not in context:
            context["needs_you"] = self.snapshots.needs_you()
            context["needs_you_cap"] = console_repo.NEEDS_YOU_CAP
        context["csrftoken"] = token() if token else ""
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def json(self, data: Any, status: int = 200) -> Response:
        return Response(to_json(data), status_code=status, media_type="application/json")


class UserMiddleware:
    """Puts the signed-in user (or None) on ``request.state.user``."""

    def __init__(self, app: ASGIApp, console: Console) -> None:
        self.app, self.console = app, console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/static/"):
            request = Request(scope)
            token = self.console.sessions.token(request)
            user = None
            state = scope.setdefault("state", {})
            if token:
                user = await run_in_threadpool(self._lookup, token)
                if user is None:
                    state["signed_out"] = "Your session ended (idle or signed out)."
            state["user"] = user
            state["session_token"] = token if user else None
        out = send
        if scope["type"] == "http" and scope["method"] == "POST":
            async def out(message: Message) -> None:
                if message["type"] == "http.response.start":
                    # a write from this console, committed before its response starts:
                    # the page the browser goes to next (its redirect) counts it
                    self.console.snapshots.invalidate()
                await send(message)
        try:
            await self.app(scope, receive, out)
        finally:
            if scope["type"] == "http" and scope["method"] == "POST":
                self.console.snapshots.invalidate()

    def _lookup(self, token: str) -> console_users.User | None:
        with self.console.db() as conn:
            return console_users.session_user(conn, token, self.console.sessions.idle)


async def _sign_in(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    if request.method == "GET" and not request.url.path.endswith(".json") \
            and request.url.path != "/events":
        return RedirectResponse(f"/login?next={exc.next_url}", status_code=303)
    return JSONResponse({"error": "sign in first"}, status_code=401)


def _error_page(console: Console) -> Any:
    async def handler(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            status, message = exc.status_code, str(exc.detail)
        elif isinstance(exc, IllegalTransition):
            status, message = 409, str(exc)
        elif isinstance(exc, JobNotFound):
            status, message = 404, str(exc)
        else:
            status, message = 400, str(exc)
        if request.url.path.startswith("/static/"):
            # a missing stylesheet or script: its status alone (no page, no database)
            return PlainTextResponse(message, status_code=status)
        if request.url.path.endswith(".json") or request.url.path == "/events":
            return JSONResponse({"error": message}, status_code=status)
        user = getattr(request.state, "user", None)
        return console.render(request, "error.html", status=status, message=message,
                              user=user, heading=HEADINGS.get(status, "Not done"),
                              back=came_from(request))
    return handler


#: an error page's heading by its status (the message says the rest)
HEADINGS = {403: "Not allowed", 404: "Not found", 429: "Too many tries"}


def came_from(request: Request) -> str | None:
    """The console page the request came from (its Referer, this origin only, the
    sign-in page aside), so an error page leads back to it -- its filters, its job --
    not to the overview."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc != request.url.netloc or referer.scheme != request.url.scheme:
        return None
    if not referer.path.startswith("/") or referer.path.startswith("//") \
            or referer.path == "/login":
        return None
    if request.method == "GET" and referer.path == request.url.path:
        return None     # the failing page itself (a filter changed on it)
    return referer.path + (f"?{referer.query}" if referer.query else "")


def create_app(dsn: str, settings: ConsoleSettings | None = None,
               service: Settings | None = None) -> ASGIApp:
    console = Console(dsn, settings or ConsoleSettings(), service or Settings())
    sso = Config.from_settings(console.settings, console.service)  # InputError: one line
    routes = [*pages_overview.routes(console), *needs_routes(console),
              *live_view.routes(console),
              *pages_jobs.routes(console), *pages_orders.routes(console),
              *pages_admin.routes(console), *(pages_sso.routes(console, sso) if sso else []),
              *trace_viewer.mount(),
              Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        console.pool.open(wait=True, timeout=30)
        await console.hub.start()
        try:
            yield
        finally:
            await console.hub.stop()
            for close in console.on_close:
                await close()
            console.pool.close()

    errors = _error_page(console)
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        SignInRequired: _sign_in, HTTPException: errors, InputError: errors,
        IllegalTransition: errors, PortalqError: errors})
    app.state.console = console
    secure = console.settings.secure_cookies
    wrapped: ASGIApp = UserMiddleware(SessionCsrf(app, console.secret, secure), console)
    wrapped = asgi_csrf.asgi_csrf(wrapped, signing_secret=derive(console.secret, "csrf"),
                                  cookie_samesite="Strict", cookie_secure=secure,
                                  always_protect={"/login"})
    wrapped = SameOrigin(wrapped, [console.service.console_url])
    outer = SecurityHeaders(wrapped)
    outer.console = console  # type: ignore[attr-defined]
    return outer


def server(app: ASGIApp, host: str, port: int) -> Any:
    """A uvicorn server for the console that ends the live streams as soon as it is asked to
    stop (SIGINT/SIGTERM or ``should_exit``), so shutdown never waits on an open page."""
    import uvicorn  # the server only when serving: tests and tools build the app without it

    class Server(uvicorn.Server):
        async def on_tick(self, counter: int) -> bool:
            stop = await super().on_tick(counter)
            if stop:
                app.console.hub.close_streams()  # type: ignore[attr-defined]
            return stop

    return Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                 timeout_graceful_shutdown=5, proxy_headers=False))


def serve(dsn: str, settings: ConsoleSettings) -> None:
    server(create_app(dsn, settings), settings.host, settings.port).run()


__all__ = ["create_app", "serve", "Console", "HTMLResponse"]
