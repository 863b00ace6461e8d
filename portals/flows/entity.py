"""``file_entity``: one job type, a flow per jurisdiction (each files on its own portal)."""

from __future__ import annotations

from typing import Any

from portalq.portals.flows.context import FlowContext
from portalq.portals.payloads import FileEntityPayload


async def file_entity(ctx: FlowContext[FileEntityPayload]) -> dict[str, Any]:
    jurisdiction = ctx.args.jurisdiction
    if jurisdiction == "BC":
        from portalq.portals.flows.bc import file_entity_bc

        return await file_entity_bc(ctx)
    if jurisdiction == "DE":
        from portalq.portals.flows.delaware import file_entity_de

        return await file_entity_de(ctx)
    from portalq.jobs.types import NoFlow

    raise NoFlow(f"no file_entity flow for jurisdiction {jurisdiction!r}")
