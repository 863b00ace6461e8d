"""Time travel: portals.calendar against a brute-force, minute-by-minute oracle.

The oracle shares no code with the implementation. It walks UTC one minute at a time
over 2026-2027 (plus margins), reads each minute on the portal's wall clock with
``datetime.astimezone`` and applies the definition literally: the wall-clock time lies
in a window that opened today, or in the tail of a window that crossed midnight from
yesterday; the opening day is not a holiday; the minute is in no closure. Window edges,
closures and DST changes fall on whole minutes, so the state is constant within a minute
and instants with odd seconds are judged by their minute.

Checked instants per calendar: 300 random ones, every minute within 2 h of each DST
change (and mid-minute ones there), each holiday's local start and end +-1 minute. That
exhaustive run is marked slow; the default run checks a deterministic sample (40 random
instants, every minute within 15 min of each DST change and every 10th out to 2 h, every
holiday edge). The oracle evaluates its bitmap a day at a time, as the checks need it.
"""

from __future__ import annotations

import importlib.resources
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import holidays
import pytest

from portalq.portals.calendar import (
    Closure,
    PortalCalendar,
    Window,
    can_start,
    closes_at,
    is_open,
    next_open,
    next_start,
)
from portalq.portals.presets import calendar_from_preset

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
# the bitmap reaches past the checked years so next-opening answers near the end exist
BASE = datetime(2025, 12, 25, tzinfo=UTC)
END = datetime(2028, 1, 20, tzinfo=UTC)
N_MINUTES = (END - BASE) // MINUTE
CHECK_FROM = datetime(2026, 1, 1, tzinfo=UTC)
CHECK_TO = datetime(2028, 1, 1, tzinfo=UTC)


def _utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


SYNTHETIC_NY = PortalCalendar(
    code="synthetic_ny",
    timezone="America/New_York",
    windows=(
        Window(0, time(9), time(17)),
        Window(0, time(17), time(18)),  # touches the one before
        Window(1, time(22), time(6)),  # crosses midnight ...
        Window(2, time(6), time(12)),  # ... and its tail meets this one
        Window(2, time(20), time(0)),  # runs to midnight, meets the whole Thursday
        Window(3, time(0), time(0)),  # whole day
        Window(4, time(23, 30), time(1, 30)),
        Window(5, time(23), time(2, 30)),  # tail ends in the spring gap / repeated hour
        Window(6, time(1, 30), time(1, 45)),  # inside the repeated hour at fall-back
        Window(6, time(2, 15), time(2, 45)),  # wholly inside the spring gap
        Window(6, time(2, 30), time(5)),  # opens inside the spring gap
        Window(6, time(18), time(0)),
    ),
    holiday_country="US",
    closures=(
        Closure(_utc(2026, 7, 1, 14), _utc(2026, 7, 3, 2), "system conversion"),
        Closure(_utc(2026, 11, 1, 5, 45), _utc(2026, 11, 1, 6, 15), "across fall-back"),
        Closure(_utc(2027, 3, 14, 6), _utc(2027, 3, 14, 7, 30), "across spring-forward"),
        Closure(_utc(2027, 11, 25, 3), _utc(2027, 11, 27, 3), "over a holiday"),
    ),
    cutoff_minutes=30,
)

# Lord Howe Island: DST shifts by 30 minutes, southern hemisphere
SYNTHETIC_LORD_HOWE = PortalCalendar(
    code="synthetic_lord_howe",
    timezone="Australia/Lord_Howe",
    windows=(
        *(Window(d, time(8), time(20)) for d in range(5)),
        Window(2, time(20), time(8)),  # Wed night into Thu morning, meets Thu 08:00
        Window(5, time(20), time(2, 15)),  # Sat into Sun across both DST changes
        Window(6, time(1, 40), time(2, 10)),
        Window(6, time(2, 10), time(2, 20)),
    ),
    holiday_country="AU",
    holiday_subdiv="NSW",
    closures=(Closure(_utc(2026, 10, 3, 14), _utc(2026, 10, 3, 16, 30), "maintenance"),),
    cutoff_minutes=45,
)

ALWAYS_WITH_CLOSURES = PortalCalendar(
    code="always_with_closures",
    timezone="America/Toronto",
    windows=tuple(Window(d, time(0), time(0)) for d in range(7)),
    closures=(
        Closure(_utc(2026, 3, 8, 6), _utc(2026, 3, 8, 8), "across spring-forward"),
        Closure(_utc(2026, 3, 8, 8), _utc(2026, 3, 8, 9), "touching the one before"),
        Closure(_utc(2027, 5, 1), _utc(2027, 5, 1, 0, 10), "short"),
    ),
    cutoff_minutes=20,
)

CALENDARS: dict[str, PortalCalendar] = {
    "bc_corporate_online": calendar_from_preset("bc_corporate_online"),
    "irs_ein": calendar_from_preset("irs_ein"),
    "irs_ein_extended": calendar_from_preset("irs_ein", hours="irs_ein_extended"),
    "delaware_icis": calendar_from_preset("delaware_icis"),
    "crtc": calendar_from_preset("crtc"),
    "email": calendar_from_preset("email"),
    "synthetic_ny": SYNTHETIC_NY,
    "synthetic_lord_howe": SYNTHETIC_LORD_HOWE,
    "always_with_closures": ALWAYS_WITH_CLOSURES,
}


# --- the oracle ---------------------------------------------------------------------


def oracle_zone(name: str) -> ZoneInfo:
    with importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/")).open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def oracle_holidays(cal: PortalCalendar) -> set[date]:
    if cal.holiday_country is None:
        return set()
    years = range(2025, 2029)
    return set(
        holidays.country_holidays(cal.holiday_country, subdiv=cal.holiday_subdiv, years=years)
    )


def oracle_windows_open(
    windows: tuple[Window, ...], weekday: int, t: time, today_holiday: bool, yesterday_holiday: bool
) -> bool:
    """The definition, word for word, for a wall-clock reading (weekday, time of day)."""
    yesterday = (weekday - 1) % 7
    for w in windows:
        whole_day = w.opens == time(0) and w.closes == time(0)
        crossing = not whole_day and w.closes <= w.opens
        if w.weekday == weekday and not today_holiday:
            if whole_day:
                return True
            if crossing and t >= w.opens:
                return True
            if not crossing and w.opens <= t < w.closes:
                return True
        if crossing and w.weekday == yesterday and not yesterday_holiday and t < w.closes:
            return True
    return False


DAY_MINUTES = 24 * 60


@dataclass
class Oracle:
    """The definition, minute by minute, evaluated lazily one UTC day at a time (a checked
    instant needs only the days from it to its answer)."""

    cal: PortalCalendar
    tz: ZoneInfo
    transitions: list[datetime]  # UTC minutes at which the UTC offset changed
    holidays: set[date]
    days: dict[int, bytes] = field(default_factory=dict)  # day -> 1 = open that minute
    memo: dict[tuple[int, time, bool, bool], bool] = field(default_factory=dict)

    def index(self, t: datetime) -> int:
        return (t - BASE) // MINUTE

    def at(self, i: int) -> datetime:
        return BASE + i * MINUTE

    def day(self, d: int) -> bytes:
        bits = self.days.get(d)
        if bits is None:
            start = d * DAY_MINUTES
            out = bytearray(min(DAY_MINUTES, N_MINUTES - start))
            u = self.at(start)
            hols, memo = self.holidays, self.memo
            closures = [c for c in self.cal.closures
                        if c.starts_at < u + DAY and c.ends_at > u]
            for k in range(len(out)):
                local = u.astimezone(self.tz)
                today = local.date()
                key = (today.weekday(), local.time(), today in hols, today - DAY in hols)
                if key not in memo:  # the definition is pure: memoize
                    memo[key] = oracle_windows_open(self.cal.windows, *key)
                closed = any(c.starts_at <= u < c.ends_at for c in closures)
                out[k] = memo[key] and not closed
                u += MINUTE
            bits = self.days[d] = bytes(out)
        return bits

    def find(self, value: int, i: int, end: int = N_MINUTES) -> int:
        """The first minute in [i, end) whose bit is ``value``; -1 if none."""
        d = i // DAY_MINUTES
        while d * DAY_MINUTES < end:
            j = self.day(d).find(value, max(0, i - d * DAY_MINUTES))
            if 0 <= j and d * DAY_MINUTES + j < end:
                return d * DAY_MINUTES + j
            if j >= 0:
                return -1
            d += 1
        return -1

    def is_open(self, t: datetime) -> bool:
        i = self.index(t)
        return bool(self.day(i // DAY_MINUTES)[i % DAY_MINUTES])

    # ``until``: look no further than this instant (None: the end of the bitmap)
    def _end(self, until: datetime | None) -> int:
        return N_MINUTES if until is None else min(N_MINUTES, self.index(until))

    def next_open(self, t: datetime, until: datetime | None = None) -> datetime | None:
        """None: not before ``until``."""
        if self.is_open(t):
            return t
        j = self.find(1, self.index(t), self._end(until))
        return None if j < 0 else self.at(j)

    def closes_at(self, t: datetime, until: datetime | None = None) -> datetime | None:
        """None: still open at ``until``."""
        j = self.find(0, self.index(t), self._end(until))
        return None if j < 0 else self.at(j)

    def can_start(self, t: datetime, cutoff: timedelta, until: datetime | None = None) -> bool:
        if not self.is_open(t):
            return False
        end = self.closes_at(t, until)
        return end is None or end - t >= cutoff

    def next_start(self, t: datetime, cutoff: timedelta,
                   until: datetime | None = None) -> datetime | None:
        i, end = self.index(t), self._end(until)
        while True:
            a = self.find(1, i, end)
            if a < 0:
                return None
            x = t if a == self.index(t) else self.at(a)
            b = self.find(0, a, end)
            if b < 0 or self.at(b) - x >= cutoff:
                return x
            i = b


def offset_changes(tz: ZoneInfo) -> list[datetime]:
    """Every UTC minute at which the zone's offset changes: hour by hour, then the minute
    inside an hour where it changed (zones change at most once in an hour)."""
    out = []
    hour = timedelta(hours=1)
    u, last = BASE, BASE.astimezone(tz).utcoffset()
    while u < END:
        off = (u + hour).astimezone(tz).utcoffset()
        if off != last:
            m = u + MINUTE
            while m.astimezone(tz).utcoffset() == last:
                m += MINUTE
            out.append(m)
            last = off
        u += hour
    return out


@cache
def oracle(name: str) -> Oracle:
    cal = CALENDARS[name]
    tz = oracle_zone(cal.timezone)
    return Oracle(cal, tz, offset_changes(tz), oracle_holidays(cal))


#: the default run's sample: every DST change and holiday edge is kept, fewer random
#: instants and a coarser walk around each DST change; the exhaustive run (marked slow)
#: checks every instant listed in the module docstring
SAMPLE_RANDOM, SAMPLE_DST_EVERY_MINUTE, SAMPLE_DST_STEP = 40, 15, 10
#: ... and looks for an answer (next opening, closing) this far ahead, not to the end of
#: the bitmap (a 24/7 portal never closes: that search would evaluate every minute)
SAMPLE_HORIZON = timedelta(days=4)


def horizon(t: datetime, exhaustive: bool) -> datetime:
    """Answers at or beyond this instant the oracle does not know (it did not look)."""
    return END if exhaustive else min(END, t + SAMPLE_HORIZON)


@cache
def instants(name: str, exhaustive: bool = True) -> tuple[datetime, ...]:
    cal = CALENDARS[name]
    orc = oracle(name)
    rng = random.Random(f"portalq-{name}")
    span = int((CHECK_TO - CHECK_FROM).total_seconds())
    out = [
        CHECK_FROM + timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
        for _ in range(300 if exhaustive else SAMPLE_RANDOM)
    ]
    dst = [t for t in orc.transitions if CHECK_FROM <= t < CHECK_TO]
    for t in dst:
        for k in range(-120, 121):
            if not exhaustive and abs(k) > SAMPLE_DST_EVERY_MINUTE and k % SAMPLE_DST_STEP:
                continue
            out.append(t + k * MINUTE)
            if k % 5 == 0:
                out.append(t + k * MINUTE + timedelta(seconds=29, microseconds=500_000))
    tz = oracle_zone(cal.timezone)
    hols = orc.holidays or oracle_holidays(calendar_from_preset("irs_ein"))
    for d in sorted(hols):
        if date(2026, 1, 1) <= d <= date(2027, 12, 31):
            for edge in (d, d + DAY):
                start = datetime(edge.year, edge.month, edge.day, tzinfo=tz).astimezone(UTC)
                out.extend((start - MINUTE, start, start + MINUTE))
    return tuple(out)


def _check(name: str, compare: Callable[[datetime], str | None], exhaustive: bool) -> None:
    bad = []
    for t in instants(name, exhaustive):
        problem = compare(t)
        if problem:
            bad.append(f"{t.isoformat()}: {problem}")
    assert not bad, f"{len(bad)} mismatches, first: " + "; ".join(bad[:8])


NAMES = list(CALENDARS)
MODES = [pytest.param(False, id="sampled"),
         pytest.param(True, id="exhaustive", marks=pytest.mark.slow)]


def test_oracle_sees_dst_changes() -> None:
    """Sanity of the oracle itself: New York changes its offset twice a year."""
    orc = oracle("irs_ein")
    assert [t for t in orc.transitions if t.year in (2026, 2027)] == [
        _utc(2026, 3, 8, 7),
        _utc(2026, 11, 1, 6),
        _utc(2027, 3, 14, 7),
        _utc(2027, 11, 7, 6),
    ]
    # 24/7 portals are open every minute; the Thursday-Thanksgiving IRS is not
    assert all(oracle("email").is_open(t) for t in instants("email", exhaustive=False))
    assert not orc.is_open(_utc(2026, 11, 26, 17))


@pytest.mark.slow
def test_oracle_24_7_is_open_every_minute() -> None:
    assert oracle("email").find(0, 0) == -1


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_is_open(name: str, exhaustive: bool) -> None:
    cal, orc = CALENDARS[name], oracle(name)

    def compare(t: datetime) -> str | None:
        got, want = is_open(cal, t), orc.is_open(t)
        return None if got == want else f"is_open {got}, oracle {want}"

    _check(name, compare, exhaustive)


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_next_open(name: str, exhaustive: bool) -> None:
    cal, orc = CALENDARS[name], oracle(name)

    def compare(t: datetime) -> str | None:
        until = horizon(t, exhaustive)
        got, want = next_open(cal, t), orc.next_open(t, until)
        if want is None:  # beyond where the oracle looked: the implementation may know more
            ok = got is None or got >= until
        else:
            ok = got == want
        return None if ok else f"next_open {got}, oracle {want}"

    _check(name, compare, exhaustive)


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_closes_at(name: str, exhaustive: bool) -> None:
    cal, orc = CALENDARS[name], oracle(name)

    def compare(t: datetime) -> str | None:
        if not orc.is_open(t):
            try:
                closes_at(cal, t)
            except ValueError:
                return None
            return "closes_at answered while closed"
        until = horizon(t, exhaustive)
        got, want = closes_at(cal, t), orc.closes_at(t, until)
        ok = (got is None or got >= until) if want is None else got == want
        return None if ok else f"closes_at {got}, oracle {want}"

    _check(name, compare, exhaustive)


@pytest.mark.parametrize("exhaustive", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_can_start_and_next_start(name: str, exhaustive: bool) -> None:
    cal, orc = CALENDARS[name], oracle(name)
    cutoff = timedelta(minutes=cal.cutoff_minutes)

    def compare(t: datetime) -> str | None:
        until = horizon(t, exhaustive)
        got, want = can_start(cal, t), orc.can_start(t, cutoff, until)
        if got != want:
            return f"can_start {got}, oracle {want}"
        got_t, want_t = next_start(cal, t), orc.next_start(t, cutoff, until)
        ok = (got_t is None or got_t >= until) if want_t is None else got_t == want_t
        return None if ok else f"next_start {got_t}, oracle {want_t}"

    _check(name, compare, exhaustive)
