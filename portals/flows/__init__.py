"""Playwright flows, one per job type, each declared with its job type
(:mod:`portals.catalogue` for portalq's own; a plugin declares its own the same way).

A flow is ``async def flow(ctx: FlowContext[Payload]) -> dict`` (``Payload``: its job
type's payload model, ``ctx.args`` its instance) returning the job's result (confirmation
numbers, ...) or raising an outcome from :mod:`jobs.errors`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from portalq.portals.flows.context import FlowContext

P = TypeVar("P", bound=BaseModel)
#: the flow of a job type whose payload model is ``P``, e.g. ``Flow[ObtainEinPayload]``
Flow = Callable[[FlowContext[P]], Awaitable[dict[str, Any]]]

__all__ = ["Flow", "FlowContext"]
