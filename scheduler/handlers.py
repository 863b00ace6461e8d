"""Which coroutine runs a job: the portal flows by default, or a registered handler.

    from scheduler.handlers import register_handler
    register_handler("renew_license", my_async_handler)   # async def (ctx) -> dict | None
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Handler = Callable[[Any], Awaitable[Mapping[str, Any] | None]]

_HANDLERS: dict[str, Handler] = {}


def register_handler(job_type: str, handler: Handler) -> None:
    _HANDLERS[job_type] = handler


def handler_for(job_type: str, payload: Mapping[str, Any]) -> tuple[Handler, bool]:
    """(handler, uses_browser)."""
    if job_type in _HANDLERS:
        return _HANDLERS[job_type], False
    from portals.flows import flow_for

    return flow_for(job_type, payload), job_type != "deliver"
