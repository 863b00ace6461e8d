"""portalq's own portals and job types, declared the way any plugin declares its own.

Loaded through the ``portalq.plugins`` entry point ``builtin`` (pyproject.toml), like every
other plugin (jobs/plugins.py). Each job type is one declaration: payload schema, portal,
secrets, rate limit, and the flow (named as ``module:function``, imported only when a job
runs, so enqueueing never imports a browser).
"""

from __future__ import annotations

from typing import Any

from portalq.jobs.types import JobType, RateLimit, register
from portalq.portals.payloads import (
    DeliverPayload,
    FileEntityPayload,
    NameSearchPayload,
    ObtainEinPayload,
    ProcessCrtcPayload,
)
from portalq.portals.presets import PRESETS, PortalPreset

_PORTALS: dict[str, PortalPreset] = {}


def declare_portal(portal: PortalPreset) -> PortalPreset:
    """A portal a plugin brings: ``portalq migrate`` (and ``portalq run``) add its row and
    weekly hours when the database has no portal of that code yet -- never overwriting what
    an operator changed since (hours, closures, the address)."""
    _PORTALS[portal.code] = portal
    return portal


def declared_portals() -> list[PortalPreset]:
    """Every declared portal (plugins loaded first)."""
    from portalq.jobs import plugins

    plugins.load()
    return list(_PORTALS.values())


for _preset in PRESETS.values():
    declare_portal(_preset)

#: where each jurisdiction files
ENTITY_PORTALS = {"BC": "bc_corporate_online", "DE": "delaware_icis"}


def _entity_portal(p: Any) -> str:
    return ENTITY_PORTALS[p.jurisdiction]


def _tax_id(p: Any) -> str:
    party = p["responsible_party"]
    return str(party.get("ssn") or party.get("itin") or "")


register(JobType("file_entity", FileEntityPayload, _entity_portal,
                 flow="portalq.portals.flows.entity:file_entity"))
register(JobType(
    "obtain_ein", ObtainEinPayload, "irs_ein",
    flow="portalq.portals.flows.irs:obtain_ein",
    reconcilable=False,
    rate_limit=RateLimit(key=_tax_id,
                         words="one per responsible party per IRS business day"),
    secret_fields=("responsible_party.ssn", "responsible_party.itin"),
    # the CP 575 link opens the letter (name, address, EIN) for whoever holds it
    secret_checkpoints=("cp575_url",),
))
register(JobType("name_search", NameSearchPayload, "bc_corporate_online",
                 flow="portalq.portals.flows.bc:name_search"))
register(JobType("process_crtc", ProcessCrtcPayload, "crtc",
                 flow="portalq.portals.flows.crtc:process_crtc"))
register(JobType("deliver", DeliverPayload, "email", flow="portalq.portals.flows.deliver:deliver",
                 uses_browser=False))

#: where each built-in portal's stand-in is served, under ``PORTALQ_STANDIN_URL``
#: (portals/standin; the demo and the tests only -- a real install uses ``portals.url``)
STANDIN_PATHS = {"bc_corporate_online": "bc", "irs_ein": "irs", "delaware_icis": "delaware",
                 "crtc": "crtc"}

# the order kinds beside the job types they are made of (issue 41)
from portalq.portals import order_kinds as _order_kinds  # noqa: E402,F401
