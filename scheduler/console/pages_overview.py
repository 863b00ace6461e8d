"""Overview (portals now, queue depth, running jobs, 24 h chart), its live stream, sign-in."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from portalq.jobs import clock
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin import users as console_users
from portalq.portals import calendar as cal
from portalq.scheduler import calendar_cache as calendars
from portalq.scheduler.console.live import stream
from portalq.scheduler.console.pages_needs import done_message, gather
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

STATUSES = ("pending", "deferred", "running", "failed")


def portal_states(conn: Any, now: datetime) -> list[dict[str, Any]]:
    out = []
    for p in calendars.load_sync(conn).values():
        is_open = cal.is_open(p.calendar, now)
        change = cal.closes_at(p.calendar, now) if is_open else cal.next_open(p.calendar, now)
        out.append({"code": p.code, "timezone": p.calendar.timezone, "open": is_open,
                    "enabled": p.enabled, "paused": p.paused, "paused_by": p.paused_by,
                    "pause_reason": p.pause_reason, "probe_at": p.probe_at,
                    "held": list(p.held),
                    "startable": calendars.startable(p, now),
                    "next_change": change, "next_change_is": "closes" if is_open else "opens"})
    return out


def compute(conn: Any, hours_cache: dict[datetime, dict[str, int]] | None = None,
            ) -> dict[str, Any]:
    now = clock.now()
    depth = console_repo.depth(conn)
    portals = portal_states(conn, now)
    totals = {s: sum(d.get(s, 0) for d in depth.values()) for s in STATUSES}
    return {"at": now, "portals": portals, "depth": depth, "totals": totals,
            "statuses": STATUSES, "running": console_repo.running(conn),
            "throughput": console_repo.throughput(conn, cache=hours_cache),
            "rows_estimate": console_repo.table_estimate(conn),
            "needs_you": console_repo.needs_you(conn), "needs_you_cap": console_repo.NEEDS_YOU_CAP}


class Snapshots:
    """The overview's numbers, computed at most once per refresh period per console process
    (page views and the live stream share them) unless a notification says they changed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lock = threading.Lock()
        self.latest: dict[str, Any] | None = None
        self.taken = 0.0
        self.hours: dict[datetime, dict[str, int]] = {}
        self.computed = 0
        self.cost = 0.0  # seconds the last computation took
        # what needs a person (every page's navigation), with its own lock: a page never
        # waits for a slow overview computation
        self.needs_lock = threading.Lock()
        self.needs_taken = 0.0
        self.needs_count = 0
        #: changes heard of (what else a console shares for a while compares it)
        self.changes = 0

    def period(self) -> float:
        """The refresh period: the configured one, longer when a computation is slow (huge
        queues), so the live overview never costs a console process more than ~5 % of a
        core."""
        return max(self.console.settings.live_refresh_seconds, 20 * self.cost)

    def invalidate(self) -> None:
        """Something changed (a notification, a write from this console): the next view
        recomputes."""
        self.taken = 0.0
        self.needs_taken = 0.0
        self.changes += 1


    def needs_you(self) -> int:
        """What needs a person (the navigation's count on every page): one small query
        per refresh period per console process, at once after a change."""
        with self.needs_lock:
            if time.monotonic() - self.needs_taken >= self.console.settings.live_refresh_seconds:
                seen = self.changes
                with self.console.db() as conn:
                    self.needs_count = console_repo.needs_you(conn)
                # a change heard of while counting may have come after the read: the count
                # is this caller's, but not kept as fresh (else it would stand for a period)
                self.needs_taken = time.monotonic() if self.changes == seen else 0.0
            return self.needs_count

    def needs_label(self) -> str:
        """:meth:`needs_you` as the navigation shows it ("1000+" at the cap)."""
        n = self.needs_you()
        return f"{n}+" if n >= console_repo.NEEDS_YOU_CAP else str(n)

    def get(self, *, fresh: bool = False) -> dict[str, Any]:
        """The overview's numbers; what needs a person in them is :meth:`needs_you`'s
        count (the navigation's, read once for both), so a page never shows two."""
        with self.lock:
            age = time.monotonic() - self.taken
            if fresh or self.latest is None or age >= self.period():
                started, seen = time.monotonic(), self.changes
                with self.console.db() as conn:
                    self.latest = compute(conn, self.hours)
                unchanged = self.changes == seen   # as in needs_you: no stale "fresh"
                with self.needs_lock:
                    self.needs_count = self.latest["needs_you"]
                    self.needs_taken = time.monotonic() if unchanged else 0.0
                self.taken = time.monotonic() if unchanged else 0.0
                self.cost = self.taken - started
                self.computed += 1
            return {**self.latest, "needs_you": self.needs_you()}


def chart(hours: list[dict[str, Any]], width: int = 720, height: int = 140,
          ) -> dict[str, Any]:
    """Bars for an inline SVG (no script, no style attribute): completed and failed per hour."""
    top = max([h["completed"] + h["failed"] for h in hours] + [1])
    slot = width / max(len(hours), 1)
    bars = []
    for i, h in enumerate(hours):
        ok = h["completed"] / top * (height - 20)
        bad = h["failed"] / top * (height - 20)
        x = round(i * slot + 2, 1)
        bars.append({"x": x, "w": round(slot - 4, 1), "label": f"{h['hour']:%H}h",
                     "ok_y": round(height - 14 - ok, 1), "ok_h": round(ok, 1),
                     "bad_y": round(height - 14 - ok - bad, 1), "bad_h": round(bad, 1),
                     "title": f"{h['hour']:%Y-%m-%d %H}:00Z: {h['completed']} completed, "
                              f"{h['failed']} failed"})
    return {"width": width, "height": height, "bars": bars, "top": top,
            "completed": sum(h["completed"] for h in hours),
            "failed": sum(h["failed"] for h in hours)}


def live_fragment(console: Console) -> str:
    snap = console.snapshots.get(fresh=True)
    template = console.templates.get_template("_live.html")
    return template.render(snap=snap, chart=chart(snap["throughput"]))


def routes(console: Console) -> list[Route]:
    def overview(request: Request) -> Response:
        # the console's front door: what needs a person first (pages_needs), then the queue
        user = require(request)
        snap = console.snapshots.get()
        return console.render(request, "overview.html", snap=snap,
                              chart=chart(snap["throughput"]), needs=gather(console),
                              back="/", can_act=user.can("operator"),
                              done=done_message(request))

    def overview_json(request: Request) -> Response:
        require(request)
        return console.json(console.snapshots.get())

    async def events(request: Request) -> Response:
        require(request)
        return StreamingResponse(stream(console.hub, request), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    def login_form(request: Request) -> Response:
        if request.state.user is not None:
            return RedirectResponse("/", status_code=303)
        note = getattr(request.state, "signed_out", "") or (
            "You are signed out." if request.query_params.get("bye") else "")
        return console.render(request, "login.html", user=None, note=note,
                              next=safe_next(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        form = await request.form()
        if not console.settings.password_sign_in:
            return console.render(request, "login.html", user=None, status=403,
                                  error="Password sign-in is off here: use single sign-on.")
        name = str(form.get("name") or "")[:64]
        password = str(form.get("password") or "")
        ip = request.client.host if request.client else "?"
        next_url = safe_next(str(form.get("next") or ""))
        token, error, status = await run_in_threadpool(_check, console, name, password, ip)
        if token is None:
            return console.render(request, "login.html", user=None, error=error,
                                  next=next_url, status=status)
        response = RedirectResponse(next_url or "/", status_code=303)
        console.sessions.set_cookie(response, token)
        return response

    async def logout(request: Request) -> Response:
        token = request.state.session_token
        if token:
            def end() -> None:
                with console.db() as conn:
                    console_users.end_session(conn, token)
            await run_in_threadpool(end)
        response = RedirectResponse("/login?bye=1", status_code=303)
        console.sessions.clear_cookie(response)
        # the trace viewer's service worker keeps the last traces it opened in memory and
        # serves their snapshots itself: signing out unregisters it with them
        response.headers["clear-site-data"] = '"storage"'
        return response

    return [Route("/", overview), Route("/overview.json", overview_json),
            Route("/events", events), Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]), Route("/logout", logout,
                                                            methods=["POST"])]


def _check(console: Console, name: str, password: str, ip: str,
           ) -> tuple[str | None, str, int]:
    """(session token, "", 303) or (None, the one-line reason, HTTP status)."""
    with console.db() as conn, conn.transaction():
        console_repo.sign_in_turn(conn, name, ip)   # parallel attempts counted, one by one
        if console_users.throttled(conn, name, ip, console.throttle):
            return None, "Too many failed sign-ins; wait a few minutes.", 429
        user = console_users.authenticate(conn, name, password)
        if user is None:
            console_users.login_failed(conn, name, ip, console.throttle)
            return None, "Wrong name or password.", 401
        return console_users.start_session(conn, user), "", 303


def safe_next(value: str | None) -> str:
    """Only a path on this console (no scheme, no //host): no open redirect."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return ""
    return value
