"""Playwright flows, one per job type; looked up by :func:`flow_for`.

A flow is ``async def flow(ctx: FlowContext) -> dict`` returning the job's result
(confirmation numbers, ...) or raising an outcome from :mod:`jobs.errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from portals.flows.context import FlowContext

Flow = Callable[[FlowContext], Awaitable[dict[str, Any]]]

# job type (and, for file_entity, jurisdiction) -> "module:function"
_FLOWS: dict[str, str] = {
    "obtain_ein": "portals.flows.irs:obtain_ein",
    "name_search": "portals.flows.bc:name_search",
    "file_entity:BC": "portals.flows.bc:file_entity_bc",
    "file_entity:DE": "portals.flows.delaware:file_entity_de",
    "process_crtc": "portals.flows.crtc:process_crtc",
    "deliver": "portals.flows.deliver:deliver",
}


def flow_for(job_type: str, payload: Mapping[str, Any]) -> Flow:
    key = job_type
    if job_type == "file_entity":
        key = f"file_entity:{payload.get('jurisdiction', '')}"
    try:
        target = _FLOWS[key]
    except KeyError:
        raise LookupError(f"no flow for {key}") from None
    module_name, func = target.split(":")
    return getattr(importlib.import_module(module_name), func)
