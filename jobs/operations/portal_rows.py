"""Portals and their calendars in the database: the rows calendars are built from,
weekly hours, closures, stored holidays, pauses. Every change that running nodes must
see NOTIFYs them (they reload their calendars at once).

Sync functions take a psycopg ``Connection``; the ``a``-prefixed ones an
``AsyncConnection`` (the service). Both run the same named statement with the same
parameters, built once here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, time, timedelta
from typing import Any, cast

from psycopg import AsyncConnection, Connection

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.rows import PortalRow, PortalState

Conn = Connection[Any]
AConn = AsyncConnection[Any]
Row = dict[str, Any]

#: what a calendar is built from, in this order (see scheduler.calendar_cache.build)
CALENDAR_QUERIES = ("list_portals", "portal_hours", "portal_closures", "portal_holidays")


def _calendar_params(since: datetime | None = None) -> dict[str, Any]:
    """Closures still ahead of now, or of ``since`` when that is earlier (a question about
    a past instant counts the closures of that time)."""
    now = clock.now()
    return {"after": (now if since is None else min(now, since)) - timedelta(days=1)}


def calendar_rows(conn: Conn, since: datetime | None = None) -> tuple[list[Row], ...]:
    """(portals, hours, closures, holidays) rows; closures from ``since`` (default now)."""
    params = _calendar_params(since)
    return tuple(sql.fetch(conn, name, params) for name in CALENDAR_QUERIES)


async def acalendar_rows(conn: AConn) -> tuple[list[Row], ...]:
    return tuple([await sql.afetch(conn, name, _calendar_params())
                  for name in CALENDAR_QUERIES])


def portals(conn: Conn) -> list[PortalRow]:
    """Every portal's row (code, timezone, pause state ...), by code."""
    return cast("list[PortalRow]", sql.fetch(conn, "list_portals"))


def codes(conn: Conn) -> list[str]:
    return [p["code"] for p in portals(conn)]


def state(conn: Conn, code: str) -> PortalState | None:
    """One portal's pause state (what an audit row records before and after)."""
    for p in portals(conn):
        if p["code"] == code:
            return PortalState(paused_at=p["paused_at"], paused_by=p["paused_by"],
                               pause_reason=p["pause_reason"], enabled=p["enabled"],
                               held=sorted(p["drift_pauses"]))
    return None


def hours(conn: Conn, code: str) -> list[tuple[int, time, time]]:
    return [(r["weekday"], r["opens"], r["closes"])
            for r in sql.fetch(conn, "portal_hours") if r["portal"] == code]


def notify(conn: Conn, code: str) -> None:
    """Tell running nodes that ``code``'s calendar or state changed."""
    sql.fetch(conn, "notify_portals", {"portal": code})


async def anotify(conn: AConn, code: str) -> None:
    await sql.afetch(conn, "notify_portals", {"portal": code})


def set_hours(conn: Conn, code: str, windows: Sequence[tuple[int, Any, Any]]) -> None:
    """Replace ``code``'s weekly hours with ``windows`` ((weekday, opens, closes))."""
    sql.fetch(conn, "delete_portal_hours", {"portal": code, "weekday": None})
    sql.fetch(conn, "insert_portal_hours", {
        "portal": code, "weekdays": [w[0] for w in windows],
        "opens": [w[1] for w in windows], "closes": [w[2] for w in windows]})
    sql.fetch(conn, "touch_portal", {"portal": code, "now": clock.now()})
    notify(conn, code)


def add_closure(conn: Conn, code: str, starts: datetime, ends: datetime, reason: str) -> int:
    row = sql.fetch_one(conn, "insert_closure", {"portal": code, "starts_at": starts,
                                                 "ends_at": ends, "reason": reason,
                                                 "now": clock.now()})
    assert row is not None
    notify(conn, code)
    return int(row["id"])


def remove_closure(conn: Conn, code: str, closure_id: int) -> Row | None:
    """The closure removed (None: ``code`` has no such closure)."""
    row = sql.fetch_one(conn, "console_closure_delete", {"id": closure_id, "portal": code})
    if row is not None:
        notify(conn, code)
    return row


# -- pause / resume (an operator's, or the circuit breaker's) ----------------------------
def _pause_params(code: str, by: str, reason: str, probe_at: datetime | None,
                  ) -> dict[str, Any]:
    return {"portal": code, "by": by, "reason": reason, "probe_at": probe_at,
            "now": clock.now()}


def pause(conn: Conn, code: str, *, by: str, reason: str,
          probe_at: datetime | None = None) -> bool:
    """Pause ``code`` (False: it was paused already); the admins get a notice."""
    rows = sql.fetch(conn, "pause_portal", _pause_params(code, by, reason, probe_at))
    notify(conn, code)
    return bool(rows)


async def apause(conn: AConn, code: str, *, by: str, reason: str,
                 probe_at: datetime | None = None) -> bool:
    rows = await sql.afetch(conn, "pause_portal", _pause_params(code, by, reason, probe_at))
    await anotify(conn, code)
    return bool(rows)


def resume(conn: Conn, code: str) -> bool:
    """Resume ``code`` (False: it was not paused)."""
    row = sql.fetch_one(conn, "operator_resume", {"portal": code, "now": clock.now()})
    notify(conn, code)
    return bool(row and row["resumed"])


async def aidle_probes_due(conn: AConn) -> list[str]:
    """Breaker-paused portals whose probe is due and that no job will probe now."""
    rows = await sql.afetch(conn, "idle_probes_due", {"now": clock.now()})
    return [r["code"] for r in rows]


async def alanding_checked(conn: AConn, code: str, *, answered: bool,
                           probe_after: timedelta) -> bool:
    """A breaker-paused portal's landing page was checked (no job probed it): answered, it
    is resumed (True; a 'resumed' notice); not, its next probe is ``probe_after`` away."""
    now = clock.now()
    if answered:
        row = await sql.afetch_one(conn, "landing_resume", {"portal": code, "now": now})
        return bool(row and row["resumed"])
    await sql.afetch(conn, "probe_failed", {"portal": code, "now": now,
                                            "probe_at": now + probe_after})
    return False


# -- stored holidays ---------------------------------------------------------------------
def holidays_due(conn: Conn, through: int) -> list[Row]:
    return sql.fetch(conn, "holidays_due", {"through": through})


async def aholidays_due(conn: AConn, through: int) -> list[Row]:
    return await sql.afetch(conn, "holidays_due", {"through": through})


def store_holidays(conn: Conn, rows: Iterable[Mapping[str, Any]]) -> None:
    for params in rows:
        sql.fetch(conn, "store_holidays", dict(params))


async def astore_holidays(conn: AConn, rows: Iterable[Mapping[str, Any]]) -> None:
    for params in rows:
        await sql.afetch(conn, "store_holidays", dict(params))


def open_around_the_clock(conn: Conn) -> None:
    """Every portal open 24/7 with no holidays and no cut-off (the demo's stand-ins)."""
    for code in codes(conn):
        set_hours(conn, code, [(d, "00:00", "00:00") for d in range(7)])
    sql.fetch(conn, "portals_without_holidays_or_cutoff")
