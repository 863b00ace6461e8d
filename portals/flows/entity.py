"""``file_entity``: one job type, a flow per jurisdiction (each files on its own portal)."""

from __future__ import annotations

from typing import Any

from portalq.portals.flows.context import FlowContext


async def file_entity(ctx: FlowContext) -> dict[str, Any]:
    jurisdiction = ctx.payload.get("jurisdiction")
    if jurisdiction == "BC":
        from portalq.portals.bc.flow import file_entity_bc

        return await file_entity_bc(ctx)
    if jurisdiction == "DE":
        from portalq.portals.delaware.flow import file_entity_de

        return await file_entity_de(ctx)
    from portalq.jobs.types import NoFlow

    raise NoFlow(f"no file_entity flow for jurisdiction {jurisdiction!r}")
