"""Portals as declared in code: hours, holidays, cut-offs, session limits.

Each portal declares itself (portalq's own in its folder, ``portals/<portal>/portal.py``;
a plugin's in its own package); the database is seeded from these declarations, and tests
build calendars from them. Hours differ between sources, so named weekly schedules are
kept side by side in HOURS_PRESETS and chosen by name (``portalq portals set-hours``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from portalq.jobs import plugins
from portalq.portals.calendar import Closure, PortalCalendar, Window, parse_hours

__all__ = ["HOURS_PRESETS", "PRESETS", "PortalPreset", "calendar_from_preset", "declare_portal",
           "declared_portals"]

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


class _Declared(Mapping[str, PortalPreset]):
    """Every declared portal by code: portalq's own (each in its folder, ``portals/irs/
    portal.py`` ...) and plugins'. Reading it loads the plugins first (the entry points, so
    this module imports no portal: the portals import it to declare themselves)."""

    def _all(self) -> dict[str, PortalPreset]:
        plugins.load()
        return _PORTALS

    def __getitem__(self, code: str) -> PortalPreset:
        return self._all()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._all()))

    def __len__(self) -> int:
        return len(self._all())


_PORTALS: dict[str, PortalPreset] = {}
PRESETS: Mapping[str, PortalPreset] = _Declared()


def declare_portal(portal: PortalPreset) -> PortalPreset:
    """A portal a plugin brings: ``portalq migrate`` (and ``portalq run``) add its row and
    weekly hours when the database has no portal of that code yet -- never overwriting what
    an operator changed since (hours, closures, the address)."""
    _PORTALS[portal.code] = portal
    return portal


def declared_portals() -> list[PortalPreset]:
    """Every declared portal (plugins loaded first)."""
    return list(PRESETS.values())


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
