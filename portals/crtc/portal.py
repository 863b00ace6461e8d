"""The CRTC, declared: its hours and the ``process_crtc`` job type."""

from __future__ import annotations

from portalq.jobs.types import JobType, register
from portalq.portals.crtc.payload import ProcessCrtcPayload
from portalq.portals.presets import HOURS_PRESETS, PortalPreset, declare_portal

CRTC = declare_portal(PortalPreset(
    code="crtc",
    name="CRTC My CRTC Account",
    timezone="America/Toronto",
    windows=HOURS_PRESETS["crtc"],  # upload is 24/7
    holiday_country=None,
    holiday_subdiv=None,
    max_concurrent_sessions=2,
    cutoff_minutes=0,
))

register(JobType("process_crtc", ProcessCrtcPayload, "crtc",
                 flow="portalq.portals.crtc.flow:process_crtc", stops_for_approval=True))
