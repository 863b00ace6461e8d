"""Delaware's Division of Corporations, declared: its hours (``file_entity`` for ``DE`` files
here, see :mod:`portals.catalogue`)."""

from __future__ import annotations

from portalq.portals.presets import HOURS_PRESETS, PortalPreset, declare_portal

DELAWARE = declare_portal(PortalPreset(
    code="delaware_icis",
    name="Delaware ICIS",
    timezone="America/New_York",
    windows=HOURS_PRESETS["delaware_icis"],
    holiday_country="US",
    holiday_subdiv="DE",
    max_concurrent_sessions=2,
    cutoff_minutes=15,
))
