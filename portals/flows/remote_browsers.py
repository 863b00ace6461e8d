"""Browser pools: remote browser servers (``playwright run-server``) per portal.

    pool = BrowserPool(config, {"irs_ein": "ws://browsers-us:3000/", "*": "ws://b:3000/"},
                       max_contexts=8, connect_timeout_s=10)
    context = await pool.new_context("irs_ein", artifacts_dir)   # waits for a free slot
    ...
    await close_context(context)                                  # frees the slot
    await pool.close()

Portals naming the same URL share one endpoint (a pool of portals); ``"*"`` serves the
portals not named. Each endpoint is one connection per process, made on first use and
made again when it was lost (a server restarted or killed); at most ``max_contexts``
contexts are open on it at once from this process (0: no cap), the client-side match of
the server's ``--max-clients``. Connecting checks the server's Playwright release against
this node's (:func:`portals.flows.browser.connect`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portalq.portals.flows import browser as browser_mod

if TYPE_CHECKING:
    from playwright.async_api import Browser

log = logging.getLogger("portalq.browser")

DEFAULT = "*"


@dataclass
class Endpoint:
    url: str
    max_contexts: int
    browser: Browser | None = None
    connects: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    slots: asyncio.Semaphore | None = None
    open_contexts: int = 0

    def __post_init__(self) -> None:
        if self.max_contexts > 0:
            self.slots = asyncio.Semaphore(self.max_contexts)


def endpoints_from_env(env: Mapping[str, str], default: str = "") -> dict[str, str]:
    """``PORTALQ_BROWSER_WS_<PORTAL>=ws://...`` per portal, ``default`` for the others."""
    out = {key.removeprefix("PORTALQ_BROWSER_WS_").lower(): value.strip()
           for key, value in env.items()
           if key.startswith("PORTALQ_BROWSER_WS_") and value.strip()}
    if default:
        out[DEFAULT] = default
    return out


class BrowserPool:
    def __init__(self, config: browser_mod.BrowserConfig, endpoints: Mapping[str, str], *,
                 max_contexts: int = 0, connect_timeout_s: float = 30.0) -> None:
        self.config = config
        self.connect_timeout_s = connect_timeout_s
        self._by_url: dict[str, Endpoint] = {}
        self._by_portal: dict[str, Endpoint] = {}
        for portal, url in endpoints.items():
            ep = self._by_url.setdefault(url, Endpoint(url, max_contexts))
            self._by_portal[portal] = ep
        self._playwright: Any = None
        self._start_lock = asyncio.Lock()

    def endpoint_for(self, portal: str) -> Endpoint | None:
        return self._by_portal.get(portal) or self._by_portal.get(DEFAULT)

    def serves(self, portal: str) -> bool:
        return self.endpoint_for(portal) is not None

    async def _pw(self) -> Any:
        async with self._start_lock:
            if self._playwright is None:
                # playwright only when a browser is needed: the CLI and enqueue never load it
                from playwright.async_api import async_playwright

                self._playwright = await async_playwright().start()
            return self._playwright

    async def browser(self, ep: Endpoint) -> Any:
        """The endpoint's connected Browser, connecting (again) when there is none."""
        async with ep.lock:
            if ep.browser is None or not ep.browser.is_connected():
                if ep.browser is not None:
                    log.warning("browser server %s was lost; reconnecting", ep.url)
                ep.browser = None
                try:
                    ep.browser = await asyncio.wait_for(
                        browser_mod.connect(await self._pw(), self.config, ep.url,
                                            timeout_s=self.connect_timeout_s),
                        timeout=self.connect_timeout_s + 5)
                except TimeoutError:
                    raise browser_mod.BrowserUnavailable(
                        f"browser server {ep.url}: no connection within "
                        f"{self.connect_timeout_s:g}s") from None
                ep.connects += 1
            return ep.browser

    async def new_context(self, portal: str, artifacts_dir: Path, **options: Any) -> Any:
        """A fresh context on ``portal``'s endpoint (its trace per the config), once a
        context slot is free; the slot is freed when the context closes (also when the
        browser server goes away)."""
        ep = self.endpoint_for(portal)
        if ep is None:
            raise LookupError(f"no browser endpoint for portal {portal!r}")
        if ep.slots is not None:
            await ep.slots.acquire()
        try:
            b = await self.browser(ep)
            context = await browser_mod.new_context(b, self.config, artifacts_dir, **options)
        except BaseException:
            if ep.slots is not None:
                ep.slots.release()
            raise
        ep.open_contexts += 1
        released = False

        def release(*_: Any) -> None:
            nonlocal released
            if not released:
                released = True
                ep.open_contexts -= 1
                if ep.slots is not None:
                    ep.slots.release()
                try:   # the connection outlives the context: no listener left behind
                    b.remove_listener("disconnected", release)
                except Exception:  # noqa: BLE001 - already gone with its browser
                    log.debug("listener already removed")

        context.on("close", release)
        # a lost server may not report each context's close: its disconnect frees them
        b.on("disconnected", release)
        return context

    def stats(self) -> dict[str, dict[str, int]]:
        return {ep.url: {"open_contexts": ep.open_contexts, "connects": ep.connects}
                for ep in self._by_url.values()}

    async def close(self) -> None:
        for ep in self._by_url.values():
            if ep.browser is not None:
                try:
                    await ep.browser.close()
                except Exception:  # noqa: BLE001 - shutting down; a lost server is fine
                    log.debug("closing %s failed", ep.url)
        if self._playwright is not None:
            try:
                await self._playwright.stop()
            except Exception:  # noqa: BLE001
                log.debug("stopping playwright failed")
