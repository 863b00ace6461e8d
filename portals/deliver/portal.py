"""Delivery by mail, declared as a portal (always open, no browser) with the ``deliver`` job
type."""

from __future__ import annotations

from portalq.jobs.types import JobType, register
from portalq.portals.deliver.payload import DeliverPayload
from portalq.portals.presets import HOURS_PRESETS, PortalPreset, declare_portal

EMAIL = declare_portal(PortalPreset(
    code="email",
    name="Email delivery",
    timezone="UTC",
    windows=HOURS_PRESETS["email"],
    holiday_country=None,
    holiday_subdiv=None,
    max_concurrent_sessions=10,
    cutoff_minutes=0,
))

register(JobType("deliver", DeliverPayload, "email", flow="portalq.portals.deliver.flow:deliver",
                 uses_browser=False))
