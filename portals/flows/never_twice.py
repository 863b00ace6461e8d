"""The browser never repeats a point of no return (issue 53).

Chromium by itself sends a POST again when a reused keep-alive connection closes before any
answer arrives: against a portal that took the request and then lost the line, that is a
second filing or a second charge no flow asked for. So each portal declares its submitting
requests (:class:`Submitting`: method and path, in ``portals/<p>/submitting.py``, found like
the lookup authorities) and :func:`guard` routes them in every flow's browser context:

- a submitting request is recorded as the started submission's (the flow wrote its
  ``submitting`` record before the click) under :data:`KEY`, before it leaves;
- it is sent once, by Playwright's own client with no retries (``route.fetch``), and its
  answer handed to the page (``route.fulfill``); Chromium's network stack, the one that
  resends, never carries it -- except in a context whose portal has an egress proxy
  (:data:`~portals.flows.browser.PROXIED`): that client does not go through the proxy as
  the browser does, so there Chromium sends it (the other rules hold);
- a connection dropped before the answer aborts it: the page sees a network error, the
  flow's answer is unknown and the job goes the lost-answer way;
- a second identical request of the same submission (the page's own retry, a later
  attempt's), or of the same browser context, is stopped before it leaves.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel

import portalq.portals as package
from portalq.jobs import clock, submission
from portalq.portals.flows.browser import PROXIED
from portalq.portals.flows.context import FlowContext

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Request, Route

log = logging.getLogger("portalq.flows")

#: checkpoint key: {submission reference: {"POST /path": when it left}} (forgotten when the
#: portal refuses the submission or an admin finds it not filed: jobs/submission.py)
KEY = submission.SENT


@dataclass(frozen=True)
class Submitting:
    """A request that files or pays on ``portal``: its method and a pattern searched in the
    URL's path."""

    portal: str
    method: str
    path: str
    what: str


@cache
def declared() -> dict[str, tuple[Submitting, ...]]:
    """Every portal's submitting requests, by portal: each portal package's
    ``submitting.SUBMITTING`` (found, so that adding a portal edits no shared file)."""
    found: dict[str, tuple[Submitting, ...]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        name = f"{package.__name__}.{info.name}.submitting"
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        for s in module.SUBMITTING:
            found[s.portal] = (*found.get(s.portal, ()), s)
    return found


async def guard(ctx: FlowContext[BaseModel], context: BrowserContext) -> None:
    """Route ``ctx.portal``'s submitting requests in ``context`` (nothing if it has none)."""
    points = declared().get(ctx.portal, ())
    if not points:
        return

    here: set[str] = set()   # sent from this context

    def which(method: str, url: str) -> Submitting | None:
        path = urlsplit(url).path
        return next((p for p in points if p.method == method and re.search(p.path, path)),
                    None)

    async def handle(route: Route, request: Request) -> None:
        point = which(request.method, request.url)
        if point is None:
            await route.fallback()
            return
        key = f"{request.method} {urlsplit(request.url).path}"
        earlier = ctx.checkpoints.get(KEY)
        sent: dict[str, Any] = dict(earlier) if isinstance(earlier, dict) else {}
        # the submissions it belongs to: those started and unconfirmed (a confirmed one's
        # later step, e.g. paying a saved draft, is sent once in this context)
        refs = [r.reference or r.name for r in submission.in_doubt(ctx.checkpoints)]
        if key in here or any(key in (sent.get(ref) or {}) for ref in refs):
            log.warning("job %s: %s stopped before it left: a second time", ctx.job_id,
                        point.what)
            await route.abort("blockedbyclient")
            return
        here.add(key)
        if refs:
            for ref in refs:
                sent[ref] = {**(sent.get(ref) or {}), key: clock.now().isoformat()}
            await ctx.save_checkpoint(**{KEY: sent})   # before it leaves
        if getattr(context, PROXIED, False):
            # Playwright's own client does not leave through the portal's egress proxy the
            # way the browser does: Chromium sends it (recorded, and never a second time
            # from the page; its own resend on a dropped reused connection stays possible)
            await route.continue_()
            return
        try:
            answer = await route.fetch(max_retries=0, max_redirects=0, timeout=0)
        except Exception as exc:  # noqa: BLE001 - the line died: the page must see it so
            log.warning("job %s: %s got no answer (%s)", ctx.job_id, point.what,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            await route.abort("connectionclosed")
            return
        await route.fulfill(response=answer)

    await context.route(lambda url: any(re.search(p.path, urlsplit(url).path)
                                         for p in points), handle)
