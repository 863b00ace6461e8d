"""Portal opening hours: a pure function of (portal calendar, instant).

A portal is open at a UTC instant ``t`` iff, reading ``t`` on the portal's local wall
clock as ``L``:

* ``L``'s time of day lies in ``[opens, closes)`` of a window that opens on ``L``'s weekday,
  or in the after-midnight tail ``[00:00, closes)`` of a window that crosses midnight and
  opened the day before;
* the date that window *opens* on is not a holiday (a crossing window's tail belongs to
  the day it opened);
* ``t`` lies in no one-off closure.

Only the wall clock counts, so DST needs no special case: a window opening at 02:30 on a
spring-forward day opens when the clock first reads 03:00, and a wall-clock time that
occurs twice at fall-back is inside (or outside) a window both times. Touching windows
(22:00 close, 22:00 open; a crossing tail meeting the next window) make one open period.

Instants in and out are timezone-aware; results are in UTC. Time zones come from the
``tzdata`` package, never from the host, so every machine agrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from portalq.portals import public_holidays
from portalq.portals.public_holidays import holiday_names
from portalq.portals.windows import (
    Closure,
    Window,
    format_window,
    parse_hours,
    parse_window,
)
from portalq.portals.zones import segments, tzdata_resource, zone

__all__ = [
    "Closure",
    "PortalCalendar",
    "Window",
    "can_start",
    "closes_at",
    "format_window",
    "holiday_dates",
    "holiday_names",
    "is_open",
    "next_open",
    "next_start",
    "parse_hours",
    "parse_window",
    "tzdata_resource",
    "zone",
]

#: how far ahead next_open / next_start look before answering None
NEXT_OPEN_HORIZON = timedelta(days=400)
#: an open period reaching this far ahead counts as "never closes" (closes_at -> None)
CLOSES_AT_HORIZON = timedelta(days=730)

_DAY = timedelta(days=1)
# the period scan covers UTC time in chunks: small first (most answers are near), then larger
_FIRST_CHUNK = timedelta(days=2)
_MAX_CHUNK = timedelta(days=32)


# --- compiled weekly tables ---------------------------------------------------------


@dataclass(frozen=True)
class _Week:
    #: per weekday: (start, end) minutes after that day's midnight, end <= 1440
    same_day: tuple[tuple[tuple[int, int], ...], ...]
    #: per weekday: end minutes of tails of crossing windows that opened the day before
    tails: tuple[tuple[int, ...], ...]
    #: per weekday: (start, end) minutes of windows opening that day, end may pass 1440
    spans: tuple[tuple[tuple[int, int], ...], ...]
    always: bool  # the windows cover the whole week without a gap


def _compile(windows: tuple[Window, ...]) -> _Week:
    same: list[list[tuple[int, int]]] = [[] for _ in range(7)]
    tails: list[list[int]] = [[] for _ in range(7)]
    spans: list[list[tuple[int, int]]] = [[] for _ in range(7)]
    for w in windows:
        start, end = w.minutes()
        spans[w.weekday].append((start, end))
        same[w.weekday].append((start, min(end, 1440)))
        if end > 1440:
            tails[(w.weekday + 1) % 7].append(end - 1440)
    week = 7 * 1440  # copies a week before and after see spans wrapping Sun -> Mon
    covered = sorted(
        (k * week + wd * 1440 + s, k * week + wd * 1440 + e)
        for k in (-1, 0, 1)
        for wd in range(7)
        for s, e in spans[wd]
    )
    reach = 0
    for s, e in covered:
        if s > reach:
            break
        reach = max(reach, e)
    return _Week(
        same_day=tuple(tuple(x) for x in same),
        tails=tuple(tuple(x) for x in tails),
        spans=tuple(tuple(sorted(x)) for x in spans),
        always=reach >= week,
    )


def _merge(intervals: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Sort and merge overlapping or touching intervals."""
    out: list[tuple[datetime, datetime]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


@dataclass(frozen=True)
class PortalCalendar:
    """Everything that decides when a portal is open. Immutable and hashable."""

    code: str
    timezone: str
    windows: tuple[Window, ...]
    holiday_country: str | None = None
    holiday_subdiv: str | None = None
    closures: tuple[Closure, ...] = ()
    cutoff_minutes: int = 0
    #: the region's holidays already known for some years (the service passes the ones
    #: stored in the database), as (year, dates) pairs; other years come from the
    #: ``holidays`` package, which is imported only then (it loads every country's module)
    known_holidays: tuple[tuple[int, frozenset[date]], ...] = ()
    # derived once, so is_open stays cheap; not part of equality or repr
    _known: Mapping[int, frozenset[date]] = field(init=False, repr=False, compare=False)
    _week: _Week = field(init=False, repr=False, compare=False)
    _closed: tuple[tuple[datetime, datetime], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", tuple(self.windows))
        object.__setattr__(self, "closures", tuple(self.closures))
        zone(self.timezone)  # ValueError if unknown
        if not all(isinstance(w, Window) for w in self.windows):
            raise ValueError("windows must be Window instances")
        if not all(isinstance(c, Closure) for c in self.closures):
            raise ValueError("closures must be Closure instances")
        if isinstance(self.cutoff_minutes, bool) or not isinstance(self.cutoff_minutes, int):
            raise ValueError(f"cutoff_minutes must be an int, got {self.cutoff_minutes!r}")
        if self.cutoff_minutes < 0:
            raise ValueError(f"cutoff_minutes must be >= 0, got {self.cutoff_minutes}")
        object.__setattr__(self, "known_holidays", tuple(self.known_holidays))
        object.__setattr__(self, "_known", dict(self.known_holidays))
        if self._known and self.holiday_country is None:
            raise ValueError("known_holidays given without holiday_country")
        if not self._known:  # known ones were stored for a region checked then
            public_holidays.check_region(self.holiday_country, self.holiday_subdiv)
        object.__setattr__(self, "_week", _compile(self.windows))
        merged = _merge((c.starts_at, c.ends_at) for c in self.closures)
        object.__setattr__(self, "_closed", tuple(merged))


def holiday_dates(cal: PortalCalendar, year: int) -> frozenset[date]:
    """The local dates of ``year`` on which ``cal``'s windows stay shut (cached)."""
    if cal.holiday_country is None:
        return frozenset()
    known = cal._known.get(year)
    if known is not None:
        return known
    return public_holidays.dates(cal.holiday_country, cal.holiday_subdiv, year)


def _is_holiday(cal: PortalCalendar, d: date) -> bool:
    return cal.holiday_country is not None and d in holiday_dates(cal, d.year)


# --- the pure functions -------------------------------------------------------------


def _utc(instant: datetime) -> datetime:
    if not isinstance(instant, datetime) or instant.utcoffset() is None:
        raise ValueError(f"instant must be a timezone-aware datetime, got {instant!r}")
    return instant.astimezone(UTC)


def _windows_open(cal: PortalCalendar, local: datetime) -> bool:
    """The window part of the definition, for a local wall-clock reading."""
    week = cal._week
    wd = local.weekday()
    m = local.hour * 60 + local.minute  # window edges are whole minutes
    d = local.date()
    if any(s <= m < e for s, e in week.same_day[wd]) and not _is_holiday(cal, d):
        return True
    return any(m < e for e in week.tails[wd]) and not _is_holiday(cal, d - _DAY)


def is_open(cal: PortalCalendar, instant: datetime) -> bool:
    """True if the portal accepts work at ``instant``."""
    u = _utc(instant)
    if any(a <= u < b for a, b in cal._closed):
        return False
    return _windows_open(cal, u.astimezone(zone(cal.timezone)))


def _naive_intervals(
    cal: PortalCalendar, first: date, last: date
) -> list[tuple[datetime, datetime]]:
    """Open intervals in local wall-clock time for windows opening on dates first..last."""
    week = cal._week
    out: list[tuple[datetime, datetime]] = []
    d = first
    while d <= last:
        spans = week.spans[d.weekday()]
        if spans and not _is_holiday(cal, d):
            midnight = datetime(d.year, d.month, d.day)
            out.extend(
                (midnight + timedelta(minutes=s), midnight + timedelta(minutes=e)) for s, e in spans
            )
        d += _DAY
    return _merge(out)


def _open_pieces(
    cal: PortalCalendar, u0: datetime, u1: datetime
) -> list[tuple[datetime, datetime]]:
    """Merged open UTC intervals within ``[u0, u1)``, closures removed."""
    week = cal._week
    if week.always and cal.holiday_country is None:
        pieces = [(u0, u1)]
    else:
        raw = []
        for s0, s1, off in segments(cal.timezone, u0, u1):
            n0 = s0.replace(tzinfo=None) + off
            n1 = s1.replace(tzinfo=None) + off
            for a, b in _naive_intervals(cal, n0.date() - _DAY, n1.date()):
                a, b = max(a, n0), min(b, n1)
                if a < b:
                    raw.append(((a - off).replace(tzinfo=UTC), (b - off).replace(tzinfo=UTC)))
        pieces = _merge(raw)
    for c0, c1 in cal._closed:
        if c1 <= u0 or c0 >= u1:
            continue
        cut = []
        for a, b in pieces:
            if a < c0:
                cut.append((a, min(b, c0)))
            if b > c1:
                cut.append((max(a, c1), b))
        pieces = cut
    return pieces


def _periods(
    cal: PortalCalendar, start: datetime, end: datetime
) -> Iterator[tuple[datetime, datetime]]:
    """Open periods meeting ``[start, end)``, in order, clipped to it, touching ones joined."""
    pending: tuple[datetime, datetime] | None = None
    c0, chunk = start, _FIRST_CHUNK
    while c0 < end:
        c1 = min(c0 + chunk, end)
        chunk = min(chunk * 2, _MAX_CHUNK)
        for a, b in _open_pieces(cal, c0, c1):
            if pending is not None and a <= pending[1]:
                pending = (pending[0], max(b, pending[1]))
                continue
            if pending is not None:
                yield pending
            pending = (a, b)
        c0 = c1
    if pending is not None:
        yield pending


def next_open(cal: PortalCalendar, instant: datetime) -> datetime | None:
    """The first instant >= ``instant`` at which the portal is open (UTC).

    ``instant`` itself if open now; None if it does not open within NEXT_OPEN_HORIZON.
    """
    u = _utc(instant)
    if is_open(cal, u):
        return u
    for a, _ in _periods(cal, u, u + NEXT_OPEN_HORIZON):
        return a
    return None


def closes_at(cal: PortalCalendar, instant: datetime) -> datetime | None:
    """When the open period around ``instant`` ends (UTC).

    Touching windows count as one period. None if it lasts past CLOSES_AT_HORIZON
    (a 24/7 portal with no holidays or closures ahead). Raises ValueError if the portal
    is closed at ``instant``: check is_open first, or use can_start.
    """
    u = _utc(instant)
    horizon = u + CLOSES_AT_HORIZON
    for a, b in _periods(cal, u, horizon):
        if a > u:
            break
        return None if b >= horizon else b
    raise ValueError(f"portal {cal.code} is closed at {u.isoformat()}")


def can_start(cal: PortalCalendar, instant: datetime) -> bool:
    """True if a flow may start now: open, and not closing within the cut-off."""
    u = _utc(instant)
    if not is_open(cal, u):
        return False
    if cal.cutoff_minutes == 0:
        return True
    horizon = u + timedelta(minutes=cal.cutoff_minutes)
    for _, b in _periods(cal, u, horizon):
        return b >= horizon  # clipped at the horizon means it lasts at least that long
    return False  # unreachable: open at u means a period starts at u


def next_start(cal: PortalCalendar, instant: datetime) -> datetime | None:
    """The earliest instant >= ``instant`` at which can_start is true (UTC), or None."""
    u = _utc(instant)
    need = timedelta(minutes=cal.cutoff_minutes)
    for a, b in _periods(cal, u, u + NEXT_OPEN_HORIZON + need):
        x = max(a, u)
        if b - x >= need:
            return x
    return None
