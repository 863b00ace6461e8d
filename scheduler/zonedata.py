"""Is the installed time-zone data new enough for the seeded calendars?

portalq reads zones from the ``tzdata`` package (``portals.calendar.zone``). BC's portal
keeps Pacific time, which is permanent UTC-7 from 2026-11-01 (tzdata 2026f, the PyPI
release 2026.6); older data (e.g. Debian's 2025b) says UTC-8 all winter, and the BC portal
would be opened an hour late all winter. ``portalq run`` refuses to start on such data.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from zoneinfo import ZoneInfo

from portalq.jobs.errors import PortalqError
from portalq.portals import calendar

REQUIRED = "2026.6"  # PyPI tzdata, IANA 2026f; pyproject.toml requires it
#: (zone, instant, the UTC offset data of release REQUIRED or newer gives there)
PROBES = (("America/Vancouver", datetime(2027, 1, 15, 12, tzinfo=UTC), timedelta(hours=-7)),)


class ZoneDataTooOld(PortalqError):
    """The tzdata release installed predates rules the calendars depend on."""


def installed_version() -> str:
    try:
        return version("tzdata")
    except PackageNotFoundError:
        return "not installed"


def _fmt(offset: timedelta | None) -> str:
    if offset is None:
        return "unknown"
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_data_problem(zone: Callable[[str], ZoneInfo] | None = None) -> str | None:
    """A one-line description of what the zone data gets wrong, or None when it is new
    enough. ``zone`` loads a zone by name (default: the one portalq uses)."""
    if zone is None:
        zone = calendar.zone
    for name, at, want in PROBES:
        try:
            got = at.astimezone(zone(name)).utcoffset()
        except (ValueError, KeyError):
            got = None
        if got != want:
            return (f"time-zone data too old (tzdata {installed_version()}): {name} is "
                    f"{_fmt(got)} on {at:%Y-%m-%d}, the portal calendars need {_fmt(want)} "
                    f"(tzdata {REQUIRED} = IANA 2026f or newer); "
                    f"run: pip install 'tzdata>={REQUIRED}'")
    return None


def check_zone_data(zone: Callable[[str], ZoneInfo] | None = None) -> None:
    problem = zone_data_problem(zone)
    if problem:
        raise ZoneDataTooOld(problem)
