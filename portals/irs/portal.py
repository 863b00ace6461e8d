"""The IRS's Apply for EIN application, declared: its hours and the ``obtain_ein`` job type.

Loaded with portalq's own portals (:mod:`portals.catalogue`), the way a plugin declares its
own; the flow is named as ``module:function``, imported only when a job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from portalq.jobs.types import JobType, RateLimit, register
from portalq.portals.irs.payload import ObtainEinPayload
from portalq.portals.presets import HOURS_PRESETS, PortalPreset, declare_portal

IRS = declare_portal(PortalPreset(
    code="irs_ein",
    name="IRS EIN Assistant",
    timezone="America/New_York",
    windows=HOURS_PRESETS["irs_ein"],
    holiday_country="US",  # federal holidays only
    holiday_subdiv=None,
    max_concurrent_sessions=1,
    cutoff_minutes=15,  # one session, 15 min idle expiry
))


def _tax_id(p: Mapping[str, Any]) -> str:
    party = p["responsible_party"]
    return str(party.get("ssn") or party.get("itin") or "")


register(JobType(
    "obtain_ein", ObtainEinPayload, "irs_ein",
    flow="portalq.portals.irs.flow:obtain_ein",
    reconcilable=False,
    # "one (1) EIN per responsible party per business day" (the IRS's code 114)
    rate_limit=RateLimit(key=_tax_id, words="one per responsible party per IRS business day"),
    secret_fields=("responsible_party.ssn", "responsible_party.itin"),
    # the CP 575 link opens the letter (name, address, EIN) for whoever holds it
    secret_checkpoints=("cp575_url",),
))
