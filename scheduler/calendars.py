"""Portal calendars as the service sees them: loaded from the database, cached, refreshed."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobs import clock, sql
from portals.calendar import Closure, PortalCalendar, Window, can_start, next_start

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

    @property
    def code(self) -> str:
        return self.calendar.code


def build(portals: list[Mapping[str, Any]], hours: list[Mapping[str, Any]],
          closures: list[Mapping[str, Any]]) -> dict[str, Portal]:
    out: dict[str, Portal] = {}
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
                cutoff_minutes=p["cutoff_minutes"])
        except ValueError as exc:
            # one portal's bad data must not stop the service: that portal stays shut
            log.error("portal %s has invalid calendar data (%s): no jobs will start on it",
                      code, exc)
            cal = PortalCalendar(code=code, timezone="UTC", windows=())
            enabled, reason = False, f"invalid calendar data: {exc}"
        out[code] = Portal(cal, p["max_concurrent_sessions"], enabled,
                           p["paused_at"] is not None, p.get("paused_by"), p.get("probe_at"),
                           reason)
    return out


async def load(conn: Any) -> dict[str, Portal]:
    now = clock.now()
    return build(await sql.afetch(conn, "list_portals"), await sql.afetch(conn, "portal_hours"),
                 await sql.afetch(conn, "portal_closures", {"after": now - timedelta(days=1)}))


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
    from datetime import UTC
    from datetime import datetime as dt

    from portals.calendar import zone

    tz = zone(portal.calendar.timezone)
    local = now.astimezone(tz).date()
    start = dt.combine(local, dt.min.time(), tz).astimezone(UTC)
    end = dt.combine(local + timedelta(days=1), dt.min.time(), tz).astimezone(UTC)
    return start, end


def next_startable(portal: Portal, after: datetime) -> datetime | None:
    return next_start(portal.calendar, after)
