"""Seed data for the known portals: hours, holidays, cut-offs, session limits.

Plain data (see shared portal-facts.md for sources): the database is seeded from it, and
tests build calendars from it. Hours differ between sources, so alternatives are kept
side by side in HOURS_PRESETS and chosen by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from portalq.portals.calendar import Closure, PortalCalendar, Window, parse_hours

__all__ = ["HOURS_PRESETS", "PRESETS", "PortalPreset", "calendar_from_preset"]

#: named weekly schedules; portal codes name their default hours
HOURS_PRESETS: dict[str, tuple[Window, ...]] = {
    # not verified publicly; the seed's hours
    "bc_corporate_online": parse_hours("Mon-Sat 06:00-22:00; Sun 13:00-22:00"),
    # IRS page text: "Monday to Friday, 7 a.m. to 10 p.m." Eastern (the default)
    "irs_ein": parse_hours("Mon-Fri 07:00-22:00"),
    # 2026 notes elsewhere: weekday windows run past midnight
    "irs_ein_extended": parse_hours("Mon-Fri 06:00-01:00; Sat 06:00-21:00; Sun 18:00-24:00"),
    # filings accepted until 22:30 ET for that day's date
    "delaware_icis": parse_hours("Mon-Fri 08:00-22:30"),
    "crtc": parse_hours("Daily 00:00-24:00"),
    "email": parse_hours("Daily 00:00-24:00"),
    "always": parse_hours("Daily 00:00-24:00"),
}


@dataclass(frozen=True)
class PortalPreset:
    """One portal's seed row."""

    code: str
    name: str
    timezone: str
    windows: tuple[Window, ...]
    holiday_country: str | None
    holiday_subdiv: str | None
    max_concurrent_sessions: int | None
    cutoff_minutes: int
    #: the real portal's address (``portals.url``; the built-ins' are seeded by migration)
    url: str | None = None

    def as_row(self) -> dict[str, object]:
        """The seed row (portals + portal_hours) :func:`jobs.db.migrate.seed_portals` takes."""
        return {"code": self.code, "name": self.name, "timezone": self.timezone,
                "holiday_country": self.holiday_country, "holiday_subdiv": self.holiday_subdiv,
                "max_concurrent_sessions": self.max_concurrent_sessions,
                "cutoff_minutes": self.cutoff_minutes, "url": self.url,
                "weekdays": [w.weekday for w in self.windows],
                "opens": [w.opens for w in self.windows],
                "closes": [w.closes for w in self.windows]}


PRESETS: dict[str, PortalPreset] = {
    p.code: p
    for p in (
        PortalPreset(
            code="bc_corporate_online",
            name="BC Registries / BC Corporate Online",
            timezone="America/Vancouver",
            windows=HOURS_PRESETS["bc_corporate_online"],
            holiday_country="CA",
            holiday_subdiv="BC",
            max_concurrent_sessions=2,
            cutoff_minutes=20,
        ),
        PortalPreset(
            code="irs_ein",
            name="IRS EIN Assistant",
            timezone="America/New_York",
            windows=HOURS_PRESETS["irs_ein"],
            holiday_country="US",  # federal holidays only
            holiday_subdiv=None,
            max_concurrent_sessions=1,
            cutoff_minutes=15,  # one session, 15 min idle expiry
        ),
        PortalPreset(
            code="delaware_icis",
            name="Delaware ICIS",
            timezone="America/New_York",
            windows=HOURS_PRESETS["delaware_icis"],
            holiday_country="US",
            holiday_subdiv="DE",
            max_concurrent_sessions=2,
            cutoff_minutes=15,
        ),
        PortalPreset(
            code="crtc",
            name="CRTC My CRTC Account",
            timezone="America/Toronto",
            windows=HOURS_PRESETS["crtc"],  # upload is 24/7
            holiday_country=None,
            holiday_subdiv=None,
            max_concurrent_sessions=2,
            cutoff_minutes=0,
        ),
        PortalPreset(
            code="email",
            name="Email delivery",
            timezone="UTC",
            windows=HOURS_PRESETS["email"],
            holiday_country=None,
            holiday_subdiv=None,
            max_concurrent_sessions=10,
            cutoff_minutes=0,
        ),
    )
}


def calendar_from_preset(
    code: str, *, hours: str | None = None, closures: tuple[Closure, ...] = ()
) -> PortalCalendar:
    """The calendar of preset ``code``; ``hours`` picks another HOURS_PRESETS schedule.

    Raises ValueError for an unknown portal or hours name.
    """
    try:
        preset = PRESETS[code]
    except KeyError:
        raise ValueError(f"unknown portal {code!r}; known: {', '.join(sorted(PRESETS))}") from None
    windows = preset.windows
    if hours is not None:
        try:
            windows = HOURS_PRESETS[hours]
        except KeyError:
            known = ", ".join(sorted(HOURS_PRESETS))
            raise ValueError(f"unknown hours preset {hours!r}; known: {known}") from None
    return PortalCalendar(
        code=preset.code,
        timezone=preset.timezone,
        windows=windows,
        holiday_country=preset.holiday_country,
        holiday_subdiv=preset.holiday_subdiv,
        closures=tuple(closures),
        cutoff_minutes=preset.cutoff_minutes,
    )
