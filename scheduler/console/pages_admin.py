"""Escalations inbox, portals (pause/resume, closures), the audit log, users (read-only:
users are managed with ``portalq users``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from portalq.jobs import audit, clock
from portalq.jobs.admin import actions as console_actions
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin import users as console_users
from portalq.jobs.clock import parse_instant
from portalq.jobs.errors import InputError
from portalq.jobs.secrets import redaction as masking
from portalq.portals import calendar as cal
from portalq.scheduler import calendar_cache as calendars
from portalq.scheduler.console.pages_jobs import actor, form_reason, text_param
from portalq.scheduler.console.pages_overview import portal_states
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from datetime import datetime

    from portalq.scheduler.console.app import Console


def _instant(value: object, name: str) -> datetime:
    text = str(value or "").strip()
    if not text:
        raise InputError(f"{name} is required")
    try:
        return parse_instant(text if ("Z" in text or "+" in text[10:]) else text + "Z")
    except ValueError as exc:
        raise InputError(f"{name}: {exc}") from None


def _windows(text: object) -> list[tuple[int, object, object]]:
    """Weekly hours as ``portalq portals set-hours`` reads them, one window per line or
    comma ("Mon-Fri 08:00-18:00, Sat 09:00-13:00")."""
    specs = [p.strip() for p in str(text or "").replace("\n", ",").split(",") if p.strip()]
    if not specs:
        raise InputError("give the weekly hours, e.g. Mon-Fri 08:00-18:00")
    try:
        parsed = [w for spec in specs for w in cal.parse_window(spec)]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return [(w.weekday, w.opens, w.closes) for w in parsed]


def routes(console: Console) -> list[Route]:
    def escalations(request: Request) -> Response:
        user = require(request)
        show_all = request.query_params.get("all") == "1"
        with console.db() as conn:
            rows = console_repo.escalations_inbox(conn, include_resolved=show_all)
        return console.render(request, "escalations.html", rows=rows, show_all=show_all,
                              can_act=user.can("operator"))

    async def escalation_act(request: Request) -> Response:
        user = require(request, "operator")
        form = await request.form()
        reason = form_reason(form)
        what = request.path_params["what"]

        def run() -> None:
            with console.db() as conn:
                console_actions.escalation(conn, actor(user),
                                           int(request.path_params["esc_id"]), what, reason)

        await run_in_threadpool(run)
        back = str(form.get("back") or "")
        return RedirectResponse(back if back.startswith("/jobs/") else "/escalations",
                                status_code=303)

    def portals(request: Request) -> Response:
        user = require(request)
        with console.db() as conn:
            states = portal_states(conn, clock.now())
            closures = console_repo.closures(conn)
            portals_by_code = calendars.load_sync(conn)
        hours = {code: ", ".join(cal.format_window(w) for w in sorted(
            p.calendar.windows, key=lambda w: (w.weekday, w.opens)))
            for code, p in portals_by_code.items()}
        return console.render(request, "portals.html", portals=states, closures=closures,
                              hours=hours, can_act=user.can("operator"))

    async def portal_act(request: Request) -> Response:
        user = require(request, "operator")
        form = await request.form()
        reason = form_reason(form)
        code, what = request.path_params["code"], request.path_params["what"]
        if what not in ("pause", "resume", "close", "reopen", "hours"):
            raise HTTPException(404, "no such action")

        def run() -> None:
            with console.db() as conn:
                a = actor(user)
                if what == "pause":
                    console_actions.pause_portal(conn, a, code, reason)
                elif what == "resume":
                    console_actions.resume_portal(conn, a, code, reason)
                elif what == "close":
                    console_actions.add_closure(conn, a, code, _instant(form.get("from"), "from"),
                                                _instant(form.get("to"), "to"), reason)
                elif what == "reopen":
                    closure = str(form.get("closure") or "")
                    if not closure.isdigit():
                        raise InputError("which closure?")
                    console_actions.remove_closure(conn, a, code, int(closure), reason)
                else:
                    console_actions.set_hours(conn, a, code, _windows(form.get("hours")),
                                              reason)

        await run_in_threadpool(run)
        return RedirectResponse("/portals", status_code=303)

    def audit_page(request: Request, as_json: bool = False) -> Response:
        require(request)
        q = request.query_params
        before = q.get("before")
        before_id = int(before) if before and before.isdigit() else None
        if before_id is not None and before_id > console_repo.MAX_ID:
            raise InputError("before: not an audit entry id")
        wanted = {k: text_param(q, k) for k in ("target", "actor", "action")}
        with console.db() as conn:
            rows = audit.entries(conn, before_id=before_id, limit=100, **wanted)
        # reasons and snapshots written before they were scrubbed (or by other tools)
        rows = [masking.scrub_ssn_like(r) for r in rows]
        if as_json:
            return console.json(rows)
        return console.render(request, "audit.html", rows=rows,
                              next_before=rows[-1]["id"] if len(rows) == 100 else None,
                              query={k: q[k] for k in ("target", "actor", "action") if q.get(k)})

    def audit_json(request: Request) -> Response:
        return audit_page(request, as_json=True)

    def users(request: Request) -> Response:
        require(request, "admin")
        with console.db() as conn:
            rows = console_users.users(conn)
        return console.render(request, "users.html", rows=rows)

    return [Route("/escalations", escalations),
            Route("/escalations/{esc_id:int}/{what}", escalation_act, methods=["POST"]),
            Route("/portals", portals),
            Route("/portals/{code}/{what}", portal_act, methods=["POST"]),
            Route("/audit", audit_page), Route("/audit.json", audit_json),
            Route("/users", users)]
