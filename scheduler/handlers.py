"""Which coroutine runs a job: the flow its job type declares (jobs/types.py), guarded.

There is one registry, the job types'. ``register_handler`` remains for plugins written
against it: it points a declared type at a handler that needs no browser.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from portalq.jobs import clock, types
from portalq.jobs.errors import (
    AccountError,
    BusinessError,
    DeferUntil,
    PortalClosed,
    UncertainOutcome,
)
from portalq.portals.flows.browser import BrowserKilledAtLaunch, BrowserUnavailable

log = logging.getLogger("portalq.worker")

Handler = types.Flow


def register_handler(job_type: str, handler: Handler, *, uses_browser: bool = False) -> None:
    """Run ``job_type``'s jobs with ``handler`` (same as ``types.set_flow``)."""
    types.set_flow(job_type, handler, uses_browser=uses_browser)


def handler_for(job_type: str) -> Handler:
    """The job type's flow, guarded. A type with no flow raises ``types.NoFlow``, a
    business error: the job fails at once instead of being retried for nothing."""
    flow = types.get(job_type).resolve_flow()
    try:
        return _guarded(flow)
    except TypeError:   # an unhashable callable: guarded afresh
        return browser_guarded(flow)


@functools.lru_cache(maxsize=1024)
def _guarded(flow: Handler) -> Handler:
    """:func:`browser_guarded` once per flow, not once per job (issue 19)."""
    return browser_guarded(flow)


#: a job whose browser server was lost (or could not be reached), or whose local browser
#: was killed while it was being launched, waits this long
BROWSER_RETRY_AFTER = timedelta(seconds=5)
BROWSER_UNAVAILABLE_RETRY_AFTER = timedelta(seconds=30)


def browser_guarded(handler: Handler) -> Handler:
    """A lost or unreachable browser server, or a local browser killed while it was being
    launched, is not the job's fault: the attempt is refunded (deferred a little, no
    outage counted against the portal). What the flow had recorded stays, so the next
    attempt resumes from its checkpoints -- after a lost submission the submission
    protocol (reconcile or escalate) decides, never a blind resubmission. Outcomes the
    flow decided itself (business error, uncertain outcome, deferral) are kept as they
    are."""
    kept = (BusinessError, UncertainOutcome, DeferUntil, PortalClosed)

    async def run(ctx: Any) -> Mapping[str, Any] | BaseModel | None:
        try:
            return await handler(ctx)
        except AccountError as exc:
            # the portal refused or locked the account: nobody may try it again (a retry
            # loop would lock the business out); the job fails at once, admins are told
            refused = getattr(ctx, "account_refused", None)
            if refused is not None:
                await refused(exc)
            raise
        except BrowserUnavailable as exc:
            log.error("job %s: %s", getattr(ctx, "job_id", "?"), exc)
            raise DeferUntil(f"browser unavailable: {exc}",
                             when=clock.now() + BROWSER_UNAVAILABLE_RETRY_AFTER) from exc
        except BrowserKilledAtLaunch as exc:
            # refunded as a browser lost mid-flow is: the next attempt launches a new one
            log.warning("job %s: %s; attempt refunded", getattr(ctx, "job_id", "?"), exc)
            raise DeferUntil(str(exc), when=clock.now() + BROWSER_RETRY_AFTER) from exc
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
            release = getattr(ctx, "release_account", None)
            if release is not None:
                await release()

    return run
