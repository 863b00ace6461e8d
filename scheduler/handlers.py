"""Which coroutine runs a job: the portal flows by default, or a registered handler.

    from scheduler.handlers import register_handler
    register_handler("renew_license", my_async_handler)   # async def (ctx) -> dict | None
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from jobs import clock

log = logging.getLogger("portalq.worker")

Handler = Callable[[Any], Awaitable[Mapping[str, Any] | None]]

_HANDLERS: dict[str, Handler] = {}


def register_handler(job_type: str, handler: Handler) -> None:
    _HANDLERS[job_type] = handler


def handler_for(job_type: str, payload: Mapping[str, Any]) -> tuple[Handler, bool]:
    """(handler, uses_browser)."""
    if job_type in _HANDLERS:
        return browser_guarded(_HANDLERS[job_type]), False
    from portals.flows import flow_for

    return browser_guarded(flow_for(job_type, payload)), job_type != "deliver"


#: a job whose browser server was lost (or could not be reached) waits this long
BROWSER_RETRY_AFTER = timedelta(seconds=5)
BROWSER_UNAVAILABLE_RETRY_AFTER = timedelta(seconds=30)


def browser_guarded(handler: Handler) -> Handler:
    """A lost or unreachable browser server is not the job's fault: the attempt is
    refunded (deferred a little, no outage counted against the portal). What the flow
    had recorded stays, so the next attempt resumes from its checkpoints -- after a lost
    submission the submission protocol (reconcile or escalate) decides, never a blind
    resubmission. Outcomes the flow decided itself (business error, uncertain outcome,
    deferral) are kept as they are."""
    from jobs.errors import BusinessError, DeferUntil, PortalClosed, UncertainOutcome
    from portals.flows.browser import BrowserUnavailable

    kept = (BusinessError, UncertainOutcome, DeferUntil, PortalClosed)

    async def run(ctx: Any) -> Mapping[str, Any] | None:
        try:
            return await handler(ctx)
        except BrowserUnavailable as exc:
            log.error("job %s: %s", getattr(ctx, "job_id", "?"), exc)
            raise DeferUntil(f"browser unavailable: {exc}",
                             when=clock.now() + BROWSER_UNAVAILABLE_RETRY_AFTER) from exc
        except kept:
            raise
        except Exception as exc:
            lost = getattr(ctx, "browser_lost", None)
            if lost is not None and await lost(exc):
                log.warning("job %s: browser server lost mid-flow; attempt refunded",
                            getattr(ctx, "job_id", "?"))
                raise DeferUntil("browser server lost mid-flow",
                                 when=clock.now() + BROWSER_RETRY_AFTER) from exc
            raise
        finally:
            unwatch = getattr(ctx, "unwatch_browsers", None)
            if unwatch is not None:
                unwatch()

    return run
