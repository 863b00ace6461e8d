"""The browsers a worker process drives: one local Chromium, started on first use and
restarted when it died, or contexts from a pool of remote browser servers
(``portals.flows.remote_browsers.BrowserPool``) for the portals it serves."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from portalq.portals.flows import browser


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

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._browser is not None:
                await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()
        if self.remote is not None:
            await self.remote.close()
