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

import importlib.resources
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, lru_cache
from importlib.resources.abc import Traversable
from zoneinfo import ZoneInfo

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
_MIDNIGHT = time(0)
# the period scan covers UTC time in chunks: small first (most answers are near), then larger
_FIRST_CHUNK = timedelta(days=2)
_MAX_CHUNK = timedelta(days=32)
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_DAY_LOOKUP = {
    **{n.lower(): i for i, n in enumerate(_DAY_NAMES)},
    **{
        n: i
        for i, n in enumerate(
            ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
        )
    },
}


# --- time zones ---------------------------------------------------------------------


def tzdata_resource(name: str) -> Traversable:
    """The TZif file for IANA zone ``name`` inside the ``tzdata`` package."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise ValueError(f"unknown time zone {name!r}")
    res = importlib.resources.files("tzdata.zoneinfo").joinpath(*parts)
    if not res.is_file():
        raise ValueError(f"unknown time zone {name!r}")
    return res


@cache
def zone(name: str) -> ZoneInfo:
    """The ZoneInfo for ``name``, built from the ``tzdata`` package (ValueError if unknown)."""
    with tzdata_resource(name).open("rb") as fobj:
        try:
            return ZoneInfo.from_file(fobj, key=name)
        except ValueError as exc:  # not a TZif file (e.g. a data file in the package)
            raise ValueError(f"unknown time zone {name!r}") from exc


def _offset(tz: ZoneInfo, u: datetime) -> timedelta:
    off = u.astimezone(tz).utcoffset()
    assert off is not None
    return off


@lru_cache(maxsize=512)
def _transitions(name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants in ``year`` at which the zone's UTC offset changes.

    Found by probing every 6 hours and bisecting to the second (tz transitions fall on
    whole seconds); assumes no zone changes its offset twice within 6 hours.
    """
    tz = zone(name)
    lo_s = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end_s = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    step = 6 * 3600
    found: list[datetime] = []

    def off(s: int) -> timedelta:
        return _offset(tz, datetime.fromtimestamp(s, UTC))

    prev = off(lo_s)
    while lo_s < end_s:
        hi_s = min(lo_s + step, end_s)
        cur = off(hi_s)
        if cur != prev:
            a, b = lo_s, hi_s  # off(a) == prev != off(b)
            while b - a > 1:
                mid = (a + b) // 2
                if off(mid) == prev:
                    a = mid
                else:
                    b = mid
            found.append(datetime.fromtimestamp(b, UTC))
        prev, lo_s = cur, hi_s
    return tuple(found)


def _segments(name: str, u0: datetime, u1: datetime) -> list[tuple[datetime, datetime, timedelta]]:
    """Split UTC ``[u0, u1)`` into pieces of constant UTC offset: (start, end, offset)."""
    tz = zone(name)
    cuts = sorted(
        {t for y in range(u0.year, u1.year + 1) for t in _transitions(name, y) if u0 < t < u1}
    )
    edges = [u0, *cuts, u1]
    return [(a, b, _offset(tz, a)) for a, b in zip(edges, edges[1:], strict=False)]


# --- data ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """A weekly opening window in the portal's local wall-clock time.

    ``weekday`` (0=Monday) is the day the window opens. ``closes <= opens`` means the
    window crosses midnight into the next day (06:00-01:00; 18:00-00:00 runs to midnight);
    ``opens == closes == 00:00`` is the whole day. Times are whole minutes.
    """

    weekday: int
    opens: time
    closes: time

    def __post_init__(self) -> None:
        if isinstance(self.weekday, bool) or not isinstance(self.weekday, int):
            raise ValueError(f"weekday must be an int 0..6, got {self.weekday!r}")
        if not 0 <= self.weekday <= 6:
            raise ValueError(f"weekday must be 0 (Mon) .. 6 (Sun), got {self.weekday}")
        for label, t in (("opens", self.opens), ("closes", self.closes)):
            if not isinstance(t, time) or t.tzinfo is not None:
                raise ValueError(f"{label} must be a naive datetime.time, got {t!r}")
            if t.second or t.microsecond:
                raise ValueError(f"{label} must be a whole minute, got {t.isoformat()}")
        if self.opens == self.closes and self.opens != _MIDNIGHT:
            raise ValueError(
                f"zero-length window {self.opens:%H:%M}-{self.closes:%H:%M} "
                "(use 00:00-24:00 for the whole day)"
            )

    @property
    def whole_day(self) -> bool:
        return self.opens == self.closes == _MIDNIGHT

    @property
    def crosses_midnight(self) -> bool:
        """True if the window runs past 24:00 into the next day (not just up to it)."""
        return not self.whole_day and _MIDNIGHT < self.closes <= self.opens

    def minutes(self) -> tuple[int, int]:
        """(start, end) in minutes after the opening day's midnight; end may exceed 1440."""
        start = self.opens.hour * 60 + self.opens.minute
        end = self.closes.hour * 60 + self.closes.minute
        if self.whole_day or end <= start:
            end += 1440
        return start, end


@dataclass(frozen=True)
class Closure:
    """A one-off closure or maintenance period ``[starts_at, ends_at)`` (aware instants)."""

    starts_at: datetime
    ends_at: datetime
    reason: str = ""

    def __post_init__(self) -> None:
        for label, t in (("starts_at", self.starts_at), ("ends_at", self.ends_at)):
            if not isinstance(t, datetime) or t.utcoffset() is None:
                raise ValueError(f"closure {label} must be a timezone-aware datetime")
            object.__setattr__(self, label, t.astimezone(UTC))
        if self.ends_at <= self.starts_at:
            raise ValueError(
                f"closure must end after it starts ({self.starts_at} .. {self.ends_at})"
            )


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
            _check_holiday_region(self.holiday_country, self.holiday_subdiv)
        object.__setattr__(self, "_week", _compile(self.windows))
        merged = _merge((c.starts_at, c.ends_at) for c in self.closures)
        object.__setattr__(self, "_closed", tuple(merged))


# --- holidays -----------------------------------------------------------------------


@lru_cache(maxsize=1)
def _supported_countries() -> dict[str, list[str]]:
    import holidays  # imports every country: only when a region must be checked

    return holidays.list_supported_countries()


def _check_holiday_region(country: str | None, subdiv: str | None) -> None:
    if country is None:
        if subdiv is not None:
            raise ValueError("holiday_subdiv given without holiday_country")
        return
    subdivs = _supported_countries().get(country)
    if subdivs is None:
        raise ValueError(f"unknown holiday country {country!r}")
    if subdiv is not None and subdiv not in subdivs:
        raise ValueError(f"unknown holiday subdivision {subdiv!r} for {country}")


@lru_cache(maxsize=256)
def _named_holidays(country: str, subdiv: str | None, year: int) -> tuple[tuple[date, str], ...]:
    # holidays imports every country: only when a region must be checked
    import holidays

    # observed days can be listed under a neighbouring year (Jan 1 observed on Dec 31)
    try:
        found = holidays.country_holidays(country, subdiv=subdiv, years=(year - 1, year, year + 1))
    except NotImplementedError as exc:
        raise ValueError(f"no holiday data for {country}/{subdiv}: {exc}") from exc
    return tuple(sorted((d, name) for d, name in found.items() if d.year == year))


@lru_cache(maxsize=256)
def _holidays(country: str, subdiv: str | None, year: int) -> frozenset[date]:
    return frozenset(d for d, _ in _named_holidays(country, subdiv, year))


def holiday_names(country: str, subdiv: str | None, years: Iterable[int],
                  ) -> list[tuple[date, str]]:
    """The region's holidays in ``years`` with their names, from the ``holidays`` package
    (what the service stores in the database; ValueError for an unknown region)."""
    _check_holiday_region(country, subdiv)
    return [row for y in sorted(set(years)) for row in _named_holidays(country, subdiv, y)]


def holiday_dates(cal: PortalCalendar, year: int) -> frozenset[date]:
    """The local dates of ``year`` on which ``cal``'s windows stay shut (cached)."""
    if cal.holiday_country is None:
        return frozenset()
    known = cal._known.get(year)
    if known is not None:
        return known
    return _holidays(cal.holiday_country, cal.holiday_subdiv, year)


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
        for s0, s1, off in _segments(cal.timezone, u0, u1):
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


# --- parsing ------------------------------------------------------------------------

_TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})$")
_SPEC_RE = re.compile(r"^\s*(?P<days>\S+)\s+(?P<opens>[\d:]+)\s*[-\u2013]\s*(?P<closes>[\d:]+)\s*$")


def _parse_time(text: str, *, closing: bool) -> time:
    m = _TIME_RE.match(text)
    if not m:
        raise ValueError(f"bad time {text!r}: expected HH:MM")
    hh, mm = int(m[1]), int(m[2])
    if closing and (hh, mm) == (24, 0):
        return _MIDNIGHT
    if hh > 23 or mm > 59:
        raise ValueError(
            f"bad time {text!r}: out of range" + ("" if closing else " (24:00 only closes)")
        )
    return time(hh, mm)


def _parse_day(text: str) -> int:
    try:
        return _DAY_LOOKUP[text.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown day {text.strip()!r}: use Mon..Sun") from None


def _parse_days(text: str) -> list[int]:
    if text.strip().lower() in ("daily", "mon-sun"):
        return list(range(7))
    days: list[int] = []
    for part in text.split(","):
        if not part.strip():
            raise ValueError(f"empty day in {text!r}")
        if "-" in part or "\u2013" in part:
            first, _, last = part.replace("\u2013", "-").partition("-")
            a, b = _parse_day(first), _parse_day(last)
            days.extend((a + i) % 7 for i in range((b - a) % 7 + 1))
        else:
            days.append(_parse_day(part))
    return days


def parse_window(spec: str) -> tuple[Window, ...]:
    """Parse ``"Mon-Fri 06:00-01:00"`` (or ``"Sat,Sun 13:00-22:00"``) into windows.

    Days: Mon..Sun or full names, ranges (``Fri-Mon`` wraps) and comma lists. ``24:00``
    may close a window; ``00:00-24:00`` is the whole day. Raises ValueError on bad input.
    """
    m = _SPEC_RE.match(spec)
    if not m:
        raise ValueError(f"bad hours {spec!r}: expected e.g. 'Mon-Fri 06:00-22:00'")
    days = _parse_days(m["days"])
    opens = _parse_time(m["opens"], closing=False)
    closes = _parse_time(m["closes"], closing=True)
    if opens == closes and opens != _MIDNIGHT:
        raise ValueError(f"bad hours {spec!r}: zero-length window")
    return tuple(Window(d, opens, closes) for d in dict.fromkeys(days))


def parse_hours(spec: str) -> tuple[Window, ...]:
    """Parse several window specs separated by ``;`` or newlines."""
    parts = [p for p in re.split(r"[;\n]", spec) if p.strip()]
    if not parts:
        raise ValueError("no opening hours given")
    return tuple(w for p in parts for w in parse_window(p))


def format_window(w: Window) -> str:
    """``"Mon 06:00-01:00"``; a window closing at midnight reads ``24:00``."""
    closes = "24:00" if w.closes == _MIDNIGHT else f"{w.closes:%H:%M}"
    return f"{_DAY_NAMES[w.weekday]} {w.opens:%H:%M}-{closes}"
