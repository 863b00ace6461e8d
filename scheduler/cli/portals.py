"""``portalq portals ...``: opening hours, closures, next opening, pause/resume.

Every change is audited like the console's (``jobs.admin.actions``): the change and its
audit row -- who (the OS user), what, when, why, before and after -- commit together."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from portalq.jobs import audit, clock, queue
from portalq.jobs.admin import actions
from portalq.jobs.audit import Actor
from portalq.jobs.limits import check_identifier
from portalq.jobs.operations import portal_rows
from portalq.portals import calendar as cal
from portalq.portals.presets import HOURS_PRESETS
from portalq.scheduler import calendar_cache
from portalq.scheduler.cli.common import (
    DbUrl,
    ExitCode,
    cli_actor,
    fail,
    parse_when,
    print_json,
    use_url,
)


def _reason(what: str) -> Any:
    return typer.Option(help=f"why (kept in the audit log; default: {what!r})")


def _by() -> Actor:
    return Actor(cli_actor(), None, "cli")


app = typer.Typer(no_args_is_help=True, help="Portals: hours, closures, next opening.")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _load(c: Any, since: datetime | None = None) -> dict[str, calendar_cache.Portal]:
    return calendar_cache.load_sync(c, since)


def _portal(portals: dict[str, calendar_cache.Portal], code: str) -> calendar_cache.Portal:
    if code not in portals:
        fail(f"unknown portal {code!r} (known: {', '.join(sorted(portals))})")
    return portals[code]


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _state(p: calendar_cache.Portal, now: datetime) -> dict[str, Any]:
    is_open = cal.is_open(p.calendar, now)
    change = cal.closes_at(p.calendar, now) if is_open else cal.next_open(p.calendar, now)
    return {"code": p.code, "timezone": p.calendar.timezone, "open": is_open,
            "startable": calendar_cache.startable(p, now), "paused": p.paused,
            "enabled": p.enabled, "max_sessions": p.max_sessions,
            "paused_by": p.paused_by, "pause_reason": p.pause_reason, "held": list(p.held),
            "probe_at": _iso(p.probe_at),
            "cutoff_minutes": p.calendar.cutoff_minutes,
            "next_change": _iso(change), "next_change_is": "close" if is_open else "open"}


@app.command("list")
def list_portals(as_json: Annotated[bool, typer.Option("--json")] = False,
                 database_url: DbUrl = None) -> None:
    """Every portal: timezone, open now, next opening or closing."""
    use_url(database_url)
    with queue.connect() as c:
        portals = _load(c)
    now = clock.now()
    rows = [_state(p, now) for p in portals.values()]
    if as_json:
        print_json(rows)
        return
    typer.echo(f"{'CODE':<20} {'TIMEZONE':<18} {'NOW':<8} {'NEXT CHANGE (UTC)':<28} SESSIONS")
    for r in rows:
        now_s = "paused" if r["paused"] else ("open" if r["open"] else "closed")
        change = f"{r['next_change_is']}s {r['next_change']}" if r["next_change"] else "-"
        # a job type held for a changed page waits for `portals resume`
        held = f"  held: {', '.join(r['held'])}" if r["held"] else ""
        typer.echo(f"{r['code']:<20} {r['timezone']:<18} {now_s:<8} {change:<28} "
                   f"{r['max_sessions'] or 'no limit'}{held}")


@app.command("hours")
def hours(code: str, as_json: Annotated[bool, typer.Option("--json")] = False,
          database_url: DbUrl = None) -> None:
    """Weekly hours (portal's local time), holidays this year, upcoming closures."""
    use_url(database_url)
    with queue.connect() as c:
        p = _portal(_load(c), code)
    k = p.calendar
    now = clock.now()
    windows = [cal.format_window(w) for w in sorted(k.windows, key=lambda w: (w.weekday, w.opens))]
    holidays = sorted(cal.holiday_dates(k, now.year)) if k.holiday_country else []
    closures = [{"from": _iso(x.starts_at), "to": _iso(x.ends_at), "reason": x.reason}
                for x in k.closures if x.ends_at > now]
    if as_json:
        print_json({"code": code, "timezone": k.timezone, "windows": windows,
                    "holidays": [d.isoformat() for d in holidays], "closures": closures,
                    "cutoff_minutes": k.cutoff_minutes})
        return
    typer.echo(f"{code} ({k.timezone}, cut-off {k.cutoff_minutes} min)")
    for w in windows:
        typer.echo(f"  {w}")
    if k.holiday_country:
        region = k.holiday_country + (f"/{k.holiday_subdiv}" if k.holiday_subdiv else "")
        typer.echo(f"  closed on {region} holidays ({len(holidays)} in {now.year})")
    for x in closures:
        typer.echo(f"  closure {x['from']} .. {x['to']}: {x['reason']}")


@app.command("next-open")
def next_open(code: str,
              at: Annotated[str | None, typer.Option("--at", help="ISO 8601 instant")] = None,
              as_json: Annotated[bool, typer.Option("--json")] = False,
              database_url: DbUrl = None) -> None:
    """The instant (UTC, ISO 8601) the portal is next open: --at itself when open then."""
    when = parse_when(at, "--at") or clock.now()
    use_url(database_url)
    with queue.connect() as c:
        p = _portal(_load(c, since=when), code)
    result = cal.next_open(p.calendar, when)
    if as_json:
        print_json({"code": code, "at": _iso(when), "next_open": _iso(result),
                    "open_at_instant": result == when})
    elif result is None:
        fail(f"{code} does not open within the next 400 days", code=ExitCode.REFUSED)
    else:
        typer.echo(_iso(result))


@app.command("set-hours")
def set_hours(
    code: str,
    windows: Annotated[list[str] | None, typer.Argument(
        help='windows like "Mon-Fri 07:00-22:00" "Sat 06:00-21:00" (closes <= opens: '
             'crosses midnight)')] = None,
    preset: Annotated[str | None, typer.Option(
        help="a named preset, e.g. irs_ein_extended")] = None,
    reason: Annotated[str, _reason("portalq portals set-hours")] = "portalq portals set-hours",
    database_url: DbUrl = None,
) -> None:
    """Replace a portal's weekly hours (audited)."""
    if bool(windows) == bool(preset):
        fail("give either windows or --preset")
    if preset:
        if preset not in HOURS_PRESETS:
            fail(f"unknown preset {preset!r} (known: {', '.join(sorted(HOURS_PRESETS))})")
        parsed = tuple(HOURS_PRESETS[preset])
    else:
        try:
            parsed = tuple(w for spec in windows or [] for w in cal.parse_window(spec))
        except ValueError as exc:
            fail(str(exc))
    use_url(database_url)
    with queue.connect() as c:
        _portal(_load(c), code)
        actions.set_hours(c, _by(), code,
                                  [(w.weekday, w.opens, w.closes) for w in parsed], reason)
    typer.echo(f"{code}: {len(parsed)} window(s) set")


@app.command("close")
def close(code: str,
          start: Annotated[str, typer.Option("--from", help="ISO 8601 instant")],
          end: Annotated[str, typer.Option("--to", help="ISO 8601 instant")],
          reason: Annotated[str, typer.Option(help="why (shown to operators)")],
          database_url: DbUrl = None) -> None:
    """Record a one-off closure (maintenance, system conversion; audited)."""
    starts, ends = parse_when(start, "--from"), parse_when(end, "--to")
    assert starts is not None and ends is not None
    if ends <= starts:
        fail("--to must be after --from")
    if not reason.strip():
        fail("--reason must not be empty")
    reason = check_identifier(reason, "--reason", 500)  # one line, no control characters
    use_url(database_url)
    with queue.connect() as c:
        _portal(_load(c), code)
        closure = actions.add_closure(c, _by(), code, starts, ends, reason)
    typer.echo(f"closure {closure} recorded for {code}")


@app.command("pause")
def pause(code: str,
          reason: Annotated[str, typer.Option(
              help="why (shown in portals list; kept in the audit log)")] = "operator",
          database_url: DbUrl = None) -> None:
    """Pause a portal by hand: its jobs wait (no attempts spent) until `resume` (audited)."""
    use_url(database_url)
    with queue.connect() as c:
        actions.pause_portal(c, _by(), code, reason)   # paused already: exit 3
    typer.echo(f"{code} paused")


@app.command("resume")
def resume(code: str,
           reason: Annotated[str, _reason("portalq portals resume")] = "portalq portals resume",
           database_url: DbUrl = None) -> None:
    """Resume a paused portal, and the job types held for a changed page (audited)."""
    use_url(database_url)
    with queue.connect() as c:
        actions.resume_portal(c, _by(), code, reason)   # not paused: exit 3
    typer.echo(f"{code} resumed")


@app.command("refresh-holidays")
def refresh_holidays(
    reason: Annotated[str, _reason("portalq portals refresh-holidays")] = (
        "portalq portals refresh-holidays"),
    database_url: DbUrl = None,
) -> None:
    """Recompute every portal's stored holidays with the installed `holidays` package
    (last year to five years ahead; the service's tick extends them by itself; audited)."""
    use_url(database_url)
    with queue.connect() as c, c.transaction():
        done = calendar_cache.refresh_holidays_sync(c, force=True)
        if done:
            portal_rows.notify(c, done[0])
        audit.record(c, _by(), "portals.refresh_holidays", "portals", reason,
                     before=None, after={"portals": done})
    typer.echo(f"holidays stored for {len(done)} portal(s)"
               + (f": {', '.join(done)}" if done else ""))
