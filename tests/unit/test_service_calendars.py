"""The service's view of portal rows: one portal's bad data never stops the others."""

from __future__ import annotations

from datetime import UTC, datetime, time

from portalq.scheduler import calendar_cache as calendars

NOW = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # Tuesday noon in New York


def _row(code: str, **over):
    return {"code": code, "timezone": "America/New_York", "holiday_country": None,
            "holiday_subdiv": None, "cutoff_minutes": 0, "max_concurrent_sessions": 1,
            "enabled": True, "paused_at": None, "paused_by": None, "probe_at": None,
            "pause_reason": None, **over}


def test_invalid_portal_is_shut_and_the_others_load():
    hours = [{"portal": c, "weekday": 1, "opens": time(7), "closes": time(22)}
             for c in ("good", "bad")]
    portals = calendars.build([_row("good"), _row("bad", holiday_subdiv="BC")], hours, [])
    assert calendars.capacity(portals["good"], NOW) == 1
    assert calendars.capacity(portals["bad"], NOW) is False
    assert "invalid calendar data" in portals["bad"].pause_reason


def test_breaker_paused_portal_gets_one_probe_when_due():
    hours = [{"portal": "p", "weekday": d, "opens": time(0), "closes": time(0)}
             for d in range(7)]
    paused = _row("p", max_concurrent_sessions=None, paused_at=NOW, paused_by="breaker",
                  probe_at=NOW)
    [portal] = calendars.build([paused], hours, []).values()
    assert calendars.capacity(portal, NOW) == 1
    operator = calendars.build([{**paused, "paused_by": "operator"}], hours, [])["p"]
    assert calendars.capacity(operator, NOW) is False


def test_capacity_and_day_hold_until_stable_until_checked_minute_by_minute():
    """The claim loop keeps a portal's capacity until ``stable_until``: over eight days
    (weekday hours with a cut-off, a weekend, DST-free December), the capacity and the
    portal day at every 5th minute before it, and 1 µs before it, are those it was computed
    for; 1 µs after it one of them has changed (so the cache is not cut short)."""
    from datetime import timedelta

    hours = [{"portal": "p", "weekday": d, "opens": time(7), "closes": time(22)}
             for d in range(5)]
    plain = calendars.build([_row("p", cutoff_minutes=15)], hours, [])["p"]
    probing = calendars.build([_row("p", paused_at=NOW, paused_by="breaker",
                                    probe_at=NOW + timedelta(hours=30))], hours, [])["p"]

    def state(portal, t):
        return calendars.capacity(portal, t), calendars.portal_day(portal, t)

    for portal in (plain, probing):
        t = NOW - timedelta(days=1)
        while t < NOW + timedelta(days=7):
            until = calendars.stable_until(portal, t)
            assert until > t
            want = state(portal, t)
            u = t
            while u < min(until, t + timedelta(days=1)):
                assert state(portal, u) == want, (t, u, until)
                u += timedelta(minutes=5)
            assert state(portal, until - timedelta(microseconds=1)) == want, (t, until)
            if portal is plain:
                assert state(portal, until + timedelta(microseconds=1)) != want, (t, until)
            t += timedelta(minutes=97)
