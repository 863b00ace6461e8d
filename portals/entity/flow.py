"""``file_entity``: one job type, a flow per jurisdiction (each files on its own portal)."""

from __future__ import annotations

from typing import Any

from portalq.jobs.types import NoFlow
from portalq.portals.bc.flow import file_entity_bc
from portalq.portals.delaware.flow import file_entity_de
from portalq.portals.entity.payload import FileEntityPayload
from portalq.portals.flows.context import FlowContext


async def file_entity(ctx: FlowContext[FileEntityPayload]) -> dict[str, Any]:
    jurisdiction = ctx.args.jurisdiction
    if jurisdiction == "BC":
        return await file_entity_bc(ctx)
    if jurisdiction == "DE":
        return await file_entity_de(ctx)
    raise NoFlow(f"no file_entity flow for jurisdiction {jurisdiction!r}")
