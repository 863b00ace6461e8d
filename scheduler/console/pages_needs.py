"""The "Needs you" page (issue 39): what needs a person, each item with the recommended
action and what it will do, and the controls that do it (operators and admins; a viewer
sees the same items without them). The overview (the console's front page) opens with it.

The actions post to the job's own action routes (pages_jobs: the same checks, reason and
audit row) or to the bulk retry's preview; ``back`` brings the person here again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from portalq.jobs.admin import needs as console_needs
from portalq.scheduler import calendar_cache as calendars
from portalq.scheduler.console.security import require

if TYPE_CHECKING:
    from portalq.scheduler.console.app import Console

#: where an action started on these pages may send the person back to
BACK = ("/", "/needs")
DONE_HERE = {"answer": "Answer sent: the flow goes on with it.",
             "approve": "Approved: it runs again now and submits what was reviewed.",
             "reject": "Rejected: cancelled, nothing filed.",
             "confirm_filed": "Completed as filed.",
             "not_filed": "It resumes from before its submission."}


def when(value: Any, tz: str | None = None) -> Markup:
    """An instant in UTC, marked for the viewer's own time zone (console.js adds it: the
    browser knows it, the server does not) and, with ``tz``, in the portal's."""
    if not isinstance(value, datetime):
        return Markup("-")
    utc = value.astimezone(UTC)
    out = Markup('<time datetime="{}" data-local>{}</time>').format(
        utc.isoformat(), f"{utc:%Y-%m-%d %H:%M} UTC")
    if tz:
        there = value.astimezone(ZoneInfo(tz))
        out += Markup(' <span class="portal-time">({} portal time)</span>').format(
            f"{there:%m-%d %H:%M %Z}")
    return out


def portal_zones(conn: Any) -> dict[str, str]:
    return {code: p.calendar.timezone for code, p in calendars.load_sync(conn).items()}


def gather(console: Console) -> dict[str, Any]:
    with console.db() as conn:
        data = console_needs.page(conn)
        data["zones"] = portal_zones(conn)
    return data


def done_message(request: Request) -> str | None:
    what = request.query_params.get("done", "")
    job = request.query_params.get("job", "")
    text = DONE_HERE.get(what)
    return f"Job {job}: {text}" if text and job.isdigit() else None


def routes(console: Console) -> list[Route]:
    env = console.templates.env
    env.filters["when"] = when

    async def needs(request: Request) -> Response:
        user = require(request)
        data = await run_in_threadpool(gather, console)
        return console.render(request, "needs.html", needs=data, back="/needs",
                              can_act=user.can("operator"), done=done_message(request))

    return [Route("/needs", needs)]


def back_to(value: Any) -> str | None:
    """Where a job action started here returns (one of :data:`BACK`), else None."""
    text = str(value or "")
    return text if text in BACK else None
