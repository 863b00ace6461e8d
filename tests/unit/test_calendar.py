"""Focused cases for portal opening hours: DST, midnight, holidays, closures, cut-off."""

from __future__ import annotations

import time as clock
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import tzdata
from hypothesis import given, settings
from hypothesis import strategies as st

from portalq.portals.calendar import (
    Closure,
    PortalCalendar,
    Window,
    can_start,
    closes_at,
    format_window,
    holiday_dates,
    is_open,
    next_open,
    next_start,
    parse_hours,
    parse_window,
    tzdata_resource,
    zone,
)
from portalq.portals.presets import HOURS_PRESETS, PRESETS, calendar_from_preset

BC = calendar_from_preset("bc_corporate_online")
IRS = calendar_from_preset("irs_ein")
IRS_EXT = calendar_from_preset("irs_ein", hours="irs_ein_extended")
EMAIL = calendar_from_preset("email")


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


def cal(hours: str, tz: str = "America/New_York", **kw: object) -> PortalCalendar:
    return PortalCalendar(code="t", timezone=tz, windows=parse_hours(hours), **kw)  # type: ignore[arg-type]


# --- time zones ---------------------------------------------------------------------


def test_zones_come_from_the_tzdata_package() -> None:
    res = tzdata_resource("America/New_York")
    assert Path(str(res)).is_relative_to(Path(tzdata.__file__).parent)
    z = zone("America/New_York")
    assert z.key == "America/New_York"
    assert zone("America/New_York") is z  # cached per name
    # built from the file, not ZoneInfo's own search path (which may be the host's)
    assert z is not ZoneInfo("America/New_York")
    with res.open("rb") as f:
        same = ZoneInfo.from_file(f, key="x")
    for month in range(1, 13):
        u = utc(2027, month, 15, 12)
        assert u.astimezone(z).utcoffset() == u.astimezone(same).utcoffset()


@pytest.mark.parametrize(
    "name", ["Mars/Olympus", "", "America", "../etc/passwd", "America//New_York", "tzdata.zi"]
)
def test_unknown_zone(name: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        zone(name)
    with pytest.raises(ValueError, match="unknown time zone"):
        PortalCalendar(code="x", timezone=name, windows=())


# --- windows and parsing ------------------------------------------------------------


def test_parse_window_and_hours() -> None:
    assert parse_window("Mon 06:00-22:00") == (Window(0, time(6), time(22)),)
    assert parse_window("Sun 18:00-24:00") == (Window(6, time(18), time(0)),)
    assert parse_window("fri-MON 6:00\u20131:00") == tuple(
        Window(d, time(6), time(1)) for d in (4, 5, 6, 0)
    )
    assert parse_window("Saturday,Sun 00:00-24:00") == (
        Window(5, time(0), time(0)),
        Window(6, time(0), time(0)),
    )
    assert len(parse_window("Daily 00:00-00:00")) == 7
    assert (
        parse_hours("Mon-Sat 06:00-22:00; Sun 13:00-22:00\n")
        == HOURS_PRESETS["bc_corporate_online"]
    )
    w = Window(0, time(6), time(1))
    assert w.crosses_midnight and not w.whole_day
    assert not Window(6, time(18), time(0)).crosses_midnight
    assert Window(3, time(0), time(0)).whole_day


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("Mxn 06:00-22:00", "unknown day 'Mxn'"),
        ("Mon-Fry 06:00-22:00", "unknown day 'Fry'"),
        ("Mon,,Tue 06:00-22:00", "empty day"),
        ("Mon 25:00-26:00", "bad time '25:00'"),
        ("Mon 06:60-07:00", "bad time '06:60'"),
        ("Mon 24:00-02:00", "24:00 only closes"),
        ("Mon 0600-2200", "bad time '0600'"),
        ("Mon 06:00", "expected e.g."),
        ("06:00-22:00", "expected e.g."),
        ("Mon 06:00-06:00", "zero-length"),
        (" ; ", "no opening hours"),
    ],
)
def test_parse_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_hours(spec)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((7, time(6), time(7)), "weekday"),
        ((True, time(6), time(7)), "weekday"),
        ((0, "06:00", time(7)), "opens"),
        ((0, time(6, 0, 30), time(7)), "whole minute"),
        ((0, time(6), time(7, tzinfo=UTC)), "closes"),
        ((0, time(6), time(6)), "zero-length"),
    ],
)
def test_window_validation(args: tuple[object, object, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Window(*args)  # type: ignore[arg-type]


@settings(database=None)
@given(
    st.integers(0, 6),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 23),
    st.integers(0, 59),
)
def test_format_parse_round_trip(wd: int, oh: int, om: int, ch: int, cm: int) -> None:
    if (oh, om) == (ch, cm) and (oh, om) != (0, 0):
        return
    w = Window(wd, time(oh, om), time(ch, cm))
    assert parse_window(format_window(w)) == (w,)


def test_calendar_validation() -> None:
    with pytest.raises(ValueError, match="holiday country"):
        cal("Mon 06:00-07:00", holiday_country="XX")
    with pytest.raises(ValueError, match="subdivision 'ZZ'"):
        cal("Mon 06:00-07:00", holiday_country="US", holiday_subdiv="ZZ")
    with pytest.raises(ValueError, match="without holiday_country"):
        cal("Mon 06:00-07:00", holiday_subdiv="BC")
    with pytest.raises(ValueError, match="cutoff"):
        cal("Mon 06:00-07:00", cutoff_minutes=-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        Closure(datetime(2026, 1, 1), utc(2026, 1, 2), "naive")
    with pytest.raises(ValueError, match="end after"):
        Closure(utc(2026, 1, 2), utc(2026, 1, 2), "empty")
    with pytest.raises(ValueError, match="timezone-aware"):
        is_open(IRS, datetime(2026, 6, 9, 12))
    # closures are kept in UTC, whatever zone they were given in
    c = Closure(datetime(2026, 5, 14, 20, tzinfo=zone("America/Vancouver")), utc(2026, 6, 1))
    assert c.starts_at == utc(2026, 5, 15, 3) and c.starts_at.tzinfo is UTC
    assert cal("Mon 06:00-07:00") == cal("Mon 06:00-07:00")  # hashable value objects
    assert len({cal("Mon 06:00-07:00"), cal("Mon 06:00-07:00")}) == 1


# --- DST ----------------------------------------------------------------------------
# New York: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z; 2026-11-01 02:00 EDT -> 01:00 EST
# at 06:00Z. Vancouver: 2026-03-08 at 10:00Z; 2025-11-02 02:00 PDT -> 01:00 PST at 09:00Z.


def test_window_opening_in_the_spring_gap_opens_when_the_clock_reaches_it() -> None:
    c = cal("Sun 02:30-05:00")
    assert not is_open(c, utc(2026, 3, 8, 6, 59))  # 01:59 EST
    assert next_open(c, utc(2026, 3, 7, 12)) == utc(2026, 3, 8, 7)  # 03:00 EDT
    assert is_open(c, utc(2026, 3, 8, 7))
    assert closes_at(c, utc(2026, 3, 8, 7)) == utc(2026, 3, 8, 9)  # 05:00 EDT
    van = cal("Sun 02:30-04:00", "America/Vancouver")
    assert next_open(van, utc(2026, 3, 8)) == utc(2026, 3, 8, 10)  # 03:00 PDT
    assert closes_at(van, utc(2026, 3, 8, 10)) == utc(2026, 3, 8, 11)


def test_window_wholly_inside_the_spring_gap_does_not_open_that_day() -> None:
    c = cal("Sun 02:10-02:50")
    assert next_open(c, utc(2026, 3, 8, 6)) == utc(2026, 3, 15, 6, 10)  # a week later, EDT


def test_window_closing_in_the_repeated_hour_is_open_both_times() -> None:
    c = cal("Sun 00:00-01:30")
    assert is_open(c, utc(2026, 11, 1, 5, 29))  # 01:29 EDT
    assert closes_at(c, utc(2026, 11, 1, 4, 10)) == utc(2026, 11, 1, 5, 30)  # 01:30 EDT
    assert not is_open(c, utc(2026, 11, 1, 5, 30))
    assert next_open(c, utc(2026, 11, 1, 5, 30)) == utc(2026, 11, 1, 6)  # 01:00 EST again
    assert closes_at(c, utc(2026, 11, 1, 6)) == utc(2026, 11, 1, 6, 30)  # 01:30 EST
    van = cal("Sun 00:00-01:30", "America/Vancouver")
    assert closes_at(van, utc(2025, 11, 2, 8)) == utc(2025, 11, 2, 8, 30)  # 01:30 PDT
    assert next_open(van, utc(2025, 11, 2, 8, 30)) == utc(2025, 11, 2, 9)  # 01:00 PST
    assert closes_at(van, utc(2025, 11, 2, 9)) == utc(2025, 11, 2, 9, 30)


def test_window_opening_inside_the_repeated_hour_follows_the_wall_clock() -> None:
    # 01:15-03:00: open 01:15 EDT..02:00 EDT, then the clock reads 01:00-01:14 again
    c = cal("Sun 01:15-03:00")
    assert next_open(c, utc(2026, 11, 1)) == utc(2026, 11, 1, 5, 15)
    assert closes_at(c, utc(2026, 11, 1, 5, 15)) == utc(2026, 11, 1, 6)
    assert next_open(c, utc(2026, 11, 1, 6)) == utc(2026, 11, 1, 6, 15)
    assert closes_at(c, utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 1, 8)  # 03:00 EST


def test_whole_days_are_23_and_25_hours_long_on_dst_sundays() -> None:
    c = cal("Sun 00:00-24:00")
    assert closes_at(c, utc(2026, 3, 8, 5)) == utc(2026, 3, 9, 4)
    assert closes_at(c, utc(2026, 11, 1, 4)) == utc(2026, 11, 2, 5)


def test_bc_sunday_hours_on_the_spring_forward_day() -> None:
    assert next_open(BC, utc(2026, 3, 8, 12)) == utc(2026, 3, 8, 20)  # 13:00 PDT
    assert next_open(BC, utc(2026, 3, 1, 12)) == utc(2026, 3, 1, 21)  # 13:00 PST


# --- crossing midnight and adjacency ------------------------------------------------


def test_window_crossing_midnight() -> None:
    # Mon 2026-06-08; EDT = UTC-4
    assert is_open(IRS_EXT, utc(2026, 6, 9, 4, 30))  # Tue 00:30, Monday's tail
    assert not is_open(IRS_EXT, utc(2026, 6, 9, 5))  # Tue 01:00
    assert next_open(IRS_EXT, utc(2026, 6, 9, 5)) == utc(2026, 6, 9, 10)  # Tue 06:00
    assert closes_at(IRS_EXT, utc(2026, 6, 13)) == utc(2026, 6, 13, 5)  # Fri 20:00 -> Sat 01:00
    assert is_open(IRS_EXT, utc(2026, 6, 13, 4, 30))  # Sat 00:30, Friday's tail


def test_window_closing_at_midnight_has_no_tail() -> None:
    # Sun 18:00-24:00 ends at Monday 00:00; Monday opens at 06:00
    assert is_open(IRS_EXT, utc(2026, 6, 15, 3, 59))  # Sun 23:59
    assert closes_at(IRS_EXT, utc(2026, 6, 15)) == utc(2026, 6, 15, 4)
    assert not is_open(IRS_EXT, utc(2026, 6, 15, 4))
    assert next_open(IRS_EXT, utc(2026, 6, 15, 4)) == utc(2026, 6, 15, 10)


def test_touching_windows_are_one_period() -> None:
    c = cal("Mon 09:00-17:00; Mon 17:00-18:00; Mon 18:00-06:00; Tue 06:00-12:00")
    assert closes_at(c, utc(2026, 6, 8, 14)) == utc(2026, 6, 9, 16)  # Tue 12:00 EDT
    c2 = cal("Wed 20:00-24:00; Thu 00:00-24:00")
    assert closes_at(c2, utc(2026, 6, 11, 1)) == utc(2026, 6, 12, 4)


# --- holidays -----------------------------------------------------------------------


def test_thanksgiving_closes_the_irs() -> None:
    assert date(2026, 11, 26) in holiday_dates(IRS, 2026)
    assert holiday_dates(IRS, 2026) is holiday_dates(IRS, 2026)  # cached
    assert holiday_dates(EMAIL, 2026) == frozenset()
    assert is_open(IRS, utc(2026, 11, 25, 17))  # Wed noon ET
    assert not is_open(IRS, utc(2026, 11, 26, 17))  # Thanksgiving noon ET
    assert next_open(IRS, utc(2026, 11, 26, 17)) == utc(2026, 11, 27, 12)  # Fri 07:00 EST


def test_a_crossing_windows_tail_belongs_to_its_opening_day() -> None:
    assert is_open(IRS_EXT, utc(2026, 11, 26, 5, 30))  # Thu 00:30, Wednesday's window
    assert closes_at(IRS_EXT, utc(2026, 11, 26, 1)) == utc(2026, 11, 26, 6)  # Thu 01:00
    assert not is_open(IRS_EXT, utc(2026, 11, 26, 15))  # Thanksgiving
    assert not is_open(IRS_EXT, utc(2026, 11, 27, 5, 30))  # Fri 00:30, Thursday's window
    assert next_open(IRS_EXT, utc(2026, 11, 26, 6)) == utc(2026, 11, 27, 11)  # Fri 06:00


def test_bc_statutory_holidays() -> None:
    assert {date(2026, 7, 1), date(2026, 8, 3)} <= holiday_dates(BC, 2026)
    assert not is_open(BC, utc(2026, 7, 1, 18))  # Canada Day, 11:00 PDT
    assert not is_open(BC, utc(2026, 7, 2, 3))  # still Canada Day locally (20:00 PDT)
    assert next_open(BC, utc(2026, 7, 1, 18)) == utc(2026, 7, 2, 13)
    # BC Day Monday: from Sunday night straight to Tuesday 06:00 PDT
    assert next_open(BC, utc(2026, 8, 3, 5, 30)) == utc(2026, 8, 4, 13)


# --- closures -----------------------------------------------------------------------


def test_closure_interrupts_the_window() -> None:
    maintenance = Closure(utc(2026, 5, 15, 3), utc(2026, 5, 15, 6), "Thu 20:00-23:00 PDT")
    c = calendar_from_preset("bc_corporate_online", closures=(maintenance,))
    assert is_open(c, utc(2026, 5, 15, 2, 59))
    assert not is_open(c, utc(2026, 5, 15, 3, 30))
    assert closes_at(c, utc(2026, 5, 14, 17)) == utc(2026, 5, 15, 3)
    assert next_open(c, utc(2026, 5, 15, 3, 30)) == utc(2026, 5, 15, 13)  # Fri 06:00


def test_closures_on_a_24_7_portal() -> None:
    down = Closure(utc(2026, 2, 1, 10), utc(2026, 2, 1, 12, 30), "mail server move")
    c = calendar_from_preset("email", closures=(down,))
    assert closes_at(c, utc(2026, 1, 20)) == utc(2026, 2, 1, 10)
    assert next_open(c, utc(2026, 2, 1, 11)) == utc(2026, 2, 1, 12, 30)
    assert closes_at(c, utc(2026, 2, 1, 12, 30)) is None
    long = Closure(utc(2026, 1, 1), utc(2028, 1, 1), "gone")
    assert next_open(calendar_from_preset("email", closures=(long,)), utc(2026, 1, 1)) is None


# --- cut-off ------------------------------------------------------------------------


def test_cutoff_before_closing() -> None:
    # Wed 2026-06-10, BC closes 22:00 PDT = 05:00Z; cut-off 20 minutes
    assert can_start(BC, utc(2026, 6, 11, 4, 40))
    assert not can_start(BC, utc(2026, 6, 11, 4, 40, 1))
    assert is_open(BC, utc(2026, 6, 11, 4, 41))
    assert next_start(BC, utc(2026, 6, 11, 4, 41)) == utc(2026, 6, 11, 13)
    assert next_start(BC, utc(2026, 6, 10, 20)) == utc(2026, 6, 10, 20)


def test_cutoff_counts_closures_and_skips_short_windows() -> None:
    soon = Closure(utc(2026, 6, 10, 20, 10), utc(2026, 6, 10, 21), "maintenance")
    c = calendar_from_preset("bc_corporate_online", closures=(soon,))
    assert not can_start(c, utc(2026, 6, 10, 20))
    assert next_start(c, utc(2026, 6, 10, 20)) == utc(2026, 6, 10, 21)
    short = cal("Mon 09:00-09:10; Tue 09:00-12:00", cutoff_minutes=15)
    assert next_open(short, utc(2026, 6, 8, 12)) == utc(2026, 6, 8, 13)
    assert next_start(short, utc(2026, 6, 8, 12)) == utc(2026, 6, 9, 13)


def test_always_open_portals_never_close() -> None:
    t = utc(2026, 12, 25, 3, 4, 5)
    for code in ("email", "crtc"):
        c = calendar_from_preset(code)
        assert is_open(c, t) and can_start(c, t)
        assert closes_at(c, t) is None
        assert next_open(c, t) == t == next_start(c, t)


# --- edges of the API ---------------------------------------------------------------


def test_no_windows_never_opens() -> None:
    c = PortalCalendar(code="none", timezone="UTC", windows=())
    assert not is_open(c, utc(2026, 1, 1))
    assert next_open(c, utc(2026, 1, 1)) is None
    assert next_start(c, utc(2026, 1, 1)) is None


def test_closes_at_refuses_a_closed_instant() -> None:
    with pytest.raises(ValueError, match="closed"):
        closes_at(IRS, utc(2026, 6, 13, 12))  # Saturday


def test_results_are_utc_for_any_aware_input() -> None:
    local = datetime(2026, 6, 9, 12, 0, 30, tzinfo=zone("America/New_York"))
    got = next_open(IRS, local)
    assert got == local and got is not None and got.tzinfo is UTC
    sat = datetime(2026, 6, 13, 12, tzinfo=zone("America/New_York"))
    assert next_open(IRS, sat) == utc(2026, 6, 15, 11)


def test_is_open_is_cheap() -> None:
    # CPU time of this process, not wall time: other processes on a busy machine do not count
    start = clock.process_time()
    t = utc(2026, 6, 9)
    for i in range(20_000):
        is_open(BC, t + timedelta(minutes=7 * i))
    assert clock.process_time() - start < 2.0


# --- presets ------------------------------------------------------------------------


def test_presets() -> None:
    assert set(PRESETS) == {"bc_corporate_online", "irs_ein", "delaware_icis", "crtc", "email"}
    assert {k: p.max_concurrent_sessions for k, p in PRESETS.items()} == {
        "bc_corporate_online": 2,
        "irs_ein": 1,
        "delaware_icis": 2,
        "crtc": 2,
        "email": 10,
    }
    assert {"irs_ein_extended", "always"} <= set(HOURS_PRESETS)
    for code in PRESETS:
        c = calendar_from_preset(code)
        assert c.code == code and c.windows == PRESETS[code].windows
    assert calendar_from_preset("irs_ein", hours="always").windows == HOURS_PRESETS["always"]
    with pytest.raises(ValueError, match="unknown portal 'nope'"):
        calendar_from_preset("nope")
    with pytest.raises(ValueError, match="unknown hours preset"):
        calendar_from_preset("irs_ein", hours="nope")
    delaware = calendar_from_preset("delaware_icis")
    assert is_open(delaware, utc(2026, 6, 10, 2, 29))  # Tue 22:29 EDT
    assert not is_open(delaware, utc(2026, 6, 10, 2, 30))
