"""The browsers a worker process drives: one local Chromium, started on first use and
restarted when it died, or contexts from a pool of remote browser servers
(``portals.flows.remote_browsers.BrowserPool``) for the portals it serves."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path
from typing import Any

from portalq.portals.flows import browser

#: how long a paused portal's landing page may take to answer its check
LANDING_TIMEOUT_S = 10.0


class Browsers:
    def __init__(self) -> None:
        self._browser: Any = None
        self._playwright: Any = None
        self._lock = asyncio.Lock()
        self.config: Any = None
        #: remote browsers per portal (set by the service when endpoints are configured)
        self.remote: Any = None
        #: each portal's egress proxy (scheduler.egress; set by the service at start)
        self.proxies: dict[str, Any] = {}

    async def local(self) -> Any:
        """The process's own browser (launched, or relaunched after a crash)."""
        async with self._lock:
            if self._browser is None or not self._browser.is_connected():
                # playwright only when a browser is needed: the CLI and enqueue never load it
                from playwright.async_api import async_playwright


                self.config = browser.load_config()
                if self._playwright is None:
                    self._playwright = await async_playwright().start()
                self._browser = await browser.launch(self._playwright, self.config)
            return self._browser

    async def new_context(self, portal: str, artifacts_dir: Path) -> Any:
        """A fresh browser context for one job on ``portal``, recording into
        ``artifacts_dir``; through the portal's proxy when it has one."""
        proxy = self.proxies.get(portal)
        options = {"proxy": proxy.options()} if proxy is not None else {}
        if self.remote is not None and self.remote.serves(portal):
            return await self.remote.new_context(portal, artifacts_dir, **options)
        b = await self.local()
        return await browser.new_context(b, self.config, artifacts_dir, **options)

    async def landing_answers(self, portal: str, url: str,
                              timeout_s: float = LANDING_TIMEOUT_S) -> bool | None:
        """Whether ``portal``'s landing page at ``url`` answers (a status below 500): the
        lightweight check of a paused portal that no job probes -- one request from a fresh
        context (through the portal's proxy, as its jobs go), no page, no job's attempt.
        False: a 5xx, refused, reset or timed out, what a job's run would take for an
        outage. None: nothing could be checked (no browser now, or it was lost meanwhile)."""
        from playwright.async_api import Error as PlaywrightError

        with tempfile.TemporaryDirectory(prefix="portalq-landing-") as tmp:
            try:
                context = await self.new_context(portal, Path(tmp))
            except Exception:  # noqa: BLE001 - no browser now: nothing known of the portal
                return None
            try:
                response = await context.request.get(url, timeout=timeout_s * 1000,
                                                     fail_on_status_code=False)
                return bool(response.status < 500)
            except PlaywrightError:
                b = context.browser
                if b is not None and not b.is_connected():
                    return None   # the browser went, not the portal
                return False
            finally:
                await browser.close_context(context)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._browser is not None:
                await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()
        if self.remote is not None:
            await self.remote.close()
