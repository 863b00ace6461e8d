"""Portal calendars as the service sees them: loaded from the database, cached, refreshed."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import datetime as dt
from typing import Any

from portalq.jobs import clock
from portalq.jobs.db.migrate import seed_portals
from portalq.jobs.operations import portal_rows
from portalq.jobs.queue import connect
from portalq.portals.calendar import (
    Closure,
    PortalCalendar,
    Window,
    can_start,
    closes_at,
    holiday_names,
    next_start,
    zone,
)

log = logging.getLogger("portalq.calendars")


@dataclass(frozen=True)
class Portal:
    calendar: PortalCalendar
    max_sessions: int | None
    enabled: bool
    paused: bool
    paused_by: str | None = None
    probe_at: datetime | None = None
    pause_reason: str | None = None
    #: the real portal's address (``portals.url``)
    url: str | None = None
    #: job types held for a page their flow does not know (until an operator resumes)
    held: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        return self.calendar.code


def _known_holidays(stored: Mapping[str, Any] | None,
                    ) -> tuple[tuple[int, frozenset[date]], ...]:
    """A portal_holidays row as PortalCalendar.known_holidays: every stored year, with its
    days (a year may have none)."""
    if stored is None:
        return ()
    by_year: dict[int, set[date]] = {y: set() for y in range(stored["first"],
                                                              stored["last"] + 1)}
    for d in stored["days"]:
        if d.year in by_year:
            by_year[d.year].add(d)
    return tuple((y, frozenset(ds)) for y, ds in sorted(by_year.items()))


def build(portals: Sequence[Mapping[str, Any]], hours: Sequence[Mapping[str, Any]],
          closures: Sequence[Mapping[str, Any]],
          holidays: Sequence[Mapping[str, Any]] = ()) -> dict[str, Portal]:
    """Calendars from database rows (``holidays``: stored ones, see refresh_holidays)."""
    out: dict[str, Portal] = {}
    stored = {h["portal"]: h for h in holidays}
    for p in portals:
        code = p["code"]
        enabled = p["enabled"]
        reason = p.get("pause_reason")
        try:
            cal = PortalCalendar(
                code=code, timezone=p["timezone"],
                windows=tuple(Window(h["weekday"], h["opens"], h["closes"])
                              for h in hours if h["portal"] == code),
                holiday_country=p["holiday_country"], holiday_subdiv=p["holiday_subdiv"],
                closures=tuple(Closure(c["starts_at"], c["ends_at"], c["reason"])
                               for c in closures if c["portal"] == code),
                cutoff_minutes=p["cutoff_minutes"],
                known_holidays=_known_holidays(stored.get(code)))
        except ValueError as exc:
            # one portal's bad data must not stop the service: that portal stays shut
            log.error("portal %s has invalid calendar data (%s): no jobs will start on it",
                      code, exc)
            cal = PortalCalendar(code=code, timezone="UTC", windows=())
            enabled, reason = False, f"invalid calendar data: {exc}"
        out[code] = Portal(cal, p["max_concurrent_sessions"], enabled,
                           p["paused_at"] is not None, p.get("paused_by"), p.get("probe_at"),
                           reason, p.get("url"), tuple(sorted(p.get("drift_pauses") or ())))
    return out


async def load(conn: Any) -> dict[str, Portal]:
    """Every portal's calendar and state, from the database (async connection)."""
    return build(*await portal_rows.acalendar_rows(conn))


def load_sync(conn: Any, since: datetime | None = None) -> dict[str, Portal]:
    """:func:`load` on a sync psycopg connection (the CLI); ``since``: an earlier instant
    the calendars will be asked about (its closures are loaded too)."""
    return build(*portal_rows.calendar_rows(conn, since))


def seed_declared_portals(url: str) -> list[str]:
    """The portals declared in code (portals.catalogue, plugins) that the database lacks:
    added with their weekly hours. Returns their codes."""
    # the declarations (their payload models) only to seed: the CLI's start stays small
    from portalq.portals.catalogue import declared_portals

    return seed_portals(url, [p.as_row() for p in declared_portals()])


# --- stored holidays ----------------------------------------------------------------
#: the years stored: from last year to this many years ahead; the tick extends them once
#: next year would no longer be covered
HOLIDAY_YEARS_AHEAD = 5


def _holiday_rows(due: Sequence[Mapping[str, Any]], now: datetime,
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """store_holidays parameters for the portals ``due`` (computed with the `holidays`
    package), and the portals whose region it cannot compute (logged, skipped)."""
    first, last = now.year - 1, now.year + HOLIDAY_YEARS_AHEAD
    out, failed = [], []
    for p in due:
        country, subdiv = p["holiday_country"], p["holiday_subdiv"]
        try:
            named = holiday_names(country, subdiv, range(first, last + 1))
        except ValueError as exc:
            log.error("portal %s: no holidays stored (%s)", p["code"], exc)
            failed.append(p["code"])
            continue
        out.append({"portal": p["code"], "region": f"{country}/{subdiv or ''}",
                    "first": first, "last": last,
                    "days": [d for d, _ in named], "names": [n for _, n in named]})
    return out, failed


async def refresh_holidays(conn: Any, now: datetime | None = None, *,
                           skip: set[str] | frozenset[str] = frozenset(),
                           ) -> tuple[list[str], list[str]]:
    """Store the holidays of portals whose stored ones are missing, stale (region changed)
    or end before next year, except ``skip``. Returns (portals refreshed, portals whose
    region could not be computed)."""
    now = now or clock.now()
    due = [p for p in await portal_rows.aholidays_due(conn, now.year + 1)
           if p["code"] not in skip]
    if not due:
        return [], []
    rows, failed = _holiday_rows(due, now)
    await portal_rows.astore_holidays(conn, rows)
    return [r["portal"] for r in rows], failed


def store_holidays(url: str | None = None) -> list[str]:
    """Store the holidays due on the database at ``url`` (what `portalq migrate` does right
    after the migrations). Returns the portals stored."""
    with connect(url) as conn:
        return refresh_holidays_sync(conn)


def refresh_holidays_sync(conn: Any, now: datetime | None = None, *, force: bool = False,
                          ) -> list[str]:
    """refresh_holidays on a sync psycopg connection (the CLI); ``force``: every
    portal with a holiday region (e.g. after an upgrade of the `holidays` package)."""
    now = now or clock.now()
    due = portal_rows.holidays_due(conn, 10_000 if force else now.year + 1)
    rows, _ = _holiday_rows(due, now)
    portal_rows.store_holidays(conn, rows)
    return [r["portal"] for r in rows]


def startable(portal: Portal, now: datetime) -> bool:
    """May a flow start on this portal now (open, not within its cut-off, not paused)?"""
    return portal.enabled and not portal.paused and can_start(portal.calendar, now)


def capacity(portal: Portal, now: datetime) -> int | None | bool:
    """How many sessions a claim may open now: False (none), None (no limit) or a number.
    A portal paused by the circuit breaker gets one probe session once its probe is due."""
    if not portal.enabled or not can_start(portal.calendar, now):
        return False
    if portal.paused:
        probe_due = portal.paused_by == "breaker" and portal.probe_at is not None \
            and portal.probe_at <= now
        return 1 if probe_due else False
    return portal.max_sessions


def portal_day(portal: Portal, now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the portal's calendar day containing ``now`` (in UTC)."""
    tz = zone(portal.calendar.timezone)
    local = now.astimezone(tz).date()
    start = dt.combine(local, dt.min.time(), tz).astimezone(UTC)
    end = dt.combine(local + timedelta(days=1), dt.min.time(), tz).astimezone(UTC)
    return start, end


def stable_until(portal: Portal, now: datetime) -> datetime:
    """An instant before which :func:`capacity` and :func:`portal_day` keep the values they
    have at ``now``: the end of the portal's day, its next last start (closing minus the
    cut-off) or next start, a breaker probe coming due -- whichever is first. The claim
    loop computes a portal's capacity once per such stretch, not once per claim."""
    ends = [portal_day(portal, now)[1]]
    if portal.enabled:
        cal = portal.calendar
        if can_start(cal, now):
            close = closes_at(cal, now)
            if close is not None:
                ends.append(close - timedelta(minutes=cal.cutoff_minutes))
        elif (start := next_start(cal, now)) is not None:
            ends.append(start)
        if portal.paused and portal.probe_at is not None and portal.probe_at > now:
            ends.append(portal.probe_at)
    return min(ends)


def next_startable(portal: Portal, after: datetime) -> datetime | None:
    return next_start(portal.calendar, after)
