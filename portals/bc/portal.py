"""BC Registries, declared: its hours and the ``name_search`` job type (``file_entity`` for
``BC`` files here too, see :mod:`portals.catalogue`)."""

from __future__ import annotations

from portalq.jobs.types import JobType, register
from portalq.portals.bc.payload import NameSearchPayload
from portalq.portals.presets import HOURS_PRESETS, PortalPreset, declare_portal

BC = declare_portal(PortalPreset(
    code="bc_corporate_online",
    name="BC Registries / BC Corporate Online",
    timezone="America/Vancouver",
    windows=HOURS_PRESETS["bc_corporate_online"],
    holiday_country="CA",
    holiday_subdiv="BC",
    max_concurrent_sessions=2,
    cutoff_minutes=20,
))

register(JobType("name_search", NameSearchPayload, "bc_corporate_online",
                 flow="portalq.portals.bc.flow:name_search"))
