"""A test plugin: job type ``page_job`` that opens ``url`` in a browser context from the
runner (a remote browser pool in the browser-pool tests) and returns the page's title.

Payload: {"url": str, "portal": str}.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from portalq.jobs import types
from portalq.portals.flows.browser import close_context
from portalq.scheduler.handlers import register_handler


class PagePayload(BaseModel):
    url: str
    portal: str = "local"


types.register(types.JobType("page_job", PagePayload, lambda p: p.portal))  # type: ignore[attr-defined]


async def handler(ctx: Any) -> dict[str, Any]:
    context = await ctx.new_browser_context()
    try:
        page = await context.new_page()
        response = await page.goto(ctx.payload["url"], timeout=60_000)
        return {"status": response.status if response else None, "title": await page.title()}
    finally:
        await close_context(context)


register_handler("page_job", handler)
