"""A plugin job type declared in one call, as docs/adding-a-portal.md shows: used by the tests
of the plugin route (every CLI command loads ``PORTALQ_PLUGINS``). Its flow reads its payload
model (``ctx.args``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from portalq.jobs.types import JobType, register
from portalq.portals.flows.context import FlowContext


class RenewalPayload(BaseModel):
    licence: str = Field(min_length=1)
    owner_ssn: str = Field(pattern=r"^\d{3}-\d{2}-\d{4}$")
    years: int = Field(default=1, ge=1, le=5)


async def renew(ctx: FlowContext[RenewalPayload]) -> dict[str, Any]:
    return {"renewed": ctx.args.licence}


def from_order(order_id: str) -> dict[str, Any] | None:
    """The business's order book, as a plugin would read it (here: orders named L-<n>)."""
    if not order_id.startswith("L-"):
        return None
    return {"licence": order_id, "owner_ssn": "123-45-6789", "years": 3}


register(JobType("renew_licence", RenewalPayload, "email", flow=renew, uses_browser=False,
                 secret_fields=("owner_ssn",), order_source=from_order))
