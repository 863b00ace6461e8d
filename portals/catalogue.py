"""portalq's own portals and job types, declared the way any plugin declares its own.

Loaded through the ``portalq.plugins`` entry point ``builtin`` (pyproject.toml), like every
other plugin (jobs/plugins.py). Each portal declares itself in its folder
(``portals/<portal>/portal.py``: its hours and its job types); ``file_entity`` spans two
portals, so it is declared here. A flow is named as ``module:function``, imported only when a
job runs, so enqueueing never imports a browser.
"""

from __future__ import annotations

from pydantic import BaseModel

# each import declares its portal and job types (registration is the import's effect)
from portalq.jobs.types import JobType, register
from portalq.portals.bc import portal as _bc  # noqa: F401
from portalq.portals.crtc import portal as _crtc  # noqa: F401
from portalq.portals.delaware import portal as _delaware  # noqa: F401
from portalq.portals.deliver import portal as _deliver  # noqa: F401
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.irs import portal as _irs  # noqa: F401
from portalq.portals.presets import declare_portal, declared_portals

__all__ = ["ENTITY_PORTALS", "STANDIN_PATHS", "declare_portal", "declared_portals"]

#: where each jurisdiction files
ENTITY_PORTALS = {"BC": "bc_corporate_online", "DE": "delaware_icis"}


def _entity_portal(p: BaseModel) -> str:
    assert isinstance(p, FileEntityPayload)  # the job type validates with this model first
    return ENTITY_PORTALS[p.jurisdiction]


register(JobType("file_entity", FileEntityPayload, _entity_portal,
                 flow="portalq.portals.entity.flow:file_entity"))

#: where each built-in portal's stand-in is served, under ``PORTALQ_STANDIN_URL``
#: (portals/standin; the demo and the tests only -- a real install uses ``portals.url``)
STANDIN_PATHS = {"bc_corporate_online": "bc", "irs_ein": "irs", "delaware_icis": "delaware",
                 "crtc": "crtc"}

# the order kinds beside the job types they are made of (issue 41)
from portalq.portals import order_kinds as _order_kinds  # noqa: E402,F401
