"""The queue's overhead on a browser job: one ``obtain_ein`` through portalq (enqueue ->
``portalq run``'s worker -> completed, stand-in IRS portal, real Chromium) against the same
Playwright flow run as a bare script (no database, no queue; an in-memory context).

    python bench/browser_bench.py [--runs 7]      # embedded PostgreSQL, nothing to set up

Both sides use the same browser settings (playwright.config) and the same stand-in server;
each run uses a new responsible party (the IRS stand-in allows one EIN per party per day).
Prints the medians and their ratio (target: portalq within 1.2x of the bare script).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

PAYLOAD: dict[str, Any] = {
    "legal_structure": "LLC", "members": 1, "state": "DE", "reason": "NEW_BUSINESS",
    "responsible_party": {"first_name": "Ada", "last_name": "Lovelace", "ssn": ""},
    "address": {"street": "1 Main St", "city": "Dover", "region": "DE", "postal_code": "19901"},
    "phone": "302-555-0100", "legal_name": "", "start_month": 11, "start_year": 2026,
    "principal_activity": "Software",
    # a formation firm applies as its clients' third-party designee (portals/irs/payload.py):
    # named here, so the bench needs no PORTALQ_IRS_DESIGNEE_* settings
    "third_party_designee": {"name": "Bench Formation Services LLC", "phone": "302-555-0150",
                             "address": {"street": "8 Filing Row", "city": "Dover",
                                         "region": "DE", "postal_code": "19904"}},
}


def payload(i: int, side: str) -> dict[str, Any]:
    ssn = f"{(7 if side == 'bare' else 8)}{i:02d}-45-{6700 + i:04d}"
    return {**PAYLOAD, "legal_name": f"Bench {side} {i} LLC",
            "responsible_party": {**PAYLOAD["responsible_party"], "ssn": ssn}}


class BareContext:
    """The FlowContext protocol, in memory: what a bare script would keep itself."""

    def __init__(self, i: int, browser: Any, config: Any, folder: Path, urls: dict[str, str]):
        from portalq.jobs.types import validate_payload

        _, self.payload, self.portal = validate_payload("obtain_ein", payload(i, "bare"))
        self.job_id, self.job_type, self.order_id, self.attempt = 10_000 + i, "obtain_ein", "B", 1
        self.checkpoints: dict[str, Any] = {}
        self.artifacts_dir = folder / f"bare-{i}"
        self.portal_urls = urls
        self._browser, self._config, self.docs = browser, config, {}

    async def save_checkpoint(self, **data: Any) -> None:
        self.checkpoints.update(data)

    async def new_browser_context(self) -> Any:
        from portalq.portals.flows.browser import new_context

        return await new_context(self._browser, self._config, self.artifacts_dir)

    def secrets(self) -> list[str]:
        return [self.payload["responsible_party"]["ssn"]]

    async def store_document(self, name: str, content_type: str, data: bytes) -> None:
        self.docs[name] = data

    async def documents_of(self, job_id: int) -> list[tuple[str, str, bytes]]:
        return []

    async def send_mail(self, message: Any) -> None:
        raise NotImplementedError


async def bare(runs: int, urls: dict[str, str], folder: Path) -> list[float]:
    from playwright.async_api import async_playwright

    from portalq.portals.flows import browser as b
    from portalq.portals.irs.flow import obtain_ein

    config = b.load_config()
    out = []
    async with async_playwright() as pw:
        br = await b.launch(pw, config)
        for i in range(runs + 1):
            t0 = time.perf_counter()
            result = await obtain_ein(BareContext(i, br, config, folder, urls))
            if i:  # the first run warms the browser up, on both sides
                out.append(time.perf_counter() - t0)
            assert result["ein"]
        await br.close()
    return out


async def queued(runs: int, standin_url: str, folder: Path) -> list[float]:
    import psycopg

    from portalq.jobs import queue
    from portalq.jobs.db.location import embedded, libpq_dsn
    from portalq.jobs.db.migrate import upgrade
    from portalq.scheduler.config import Settings
    from portalq.scheduler.service import serve

    pg = embedded()
    pg.ensure_running()
    with psycopg.connect(pg.dsn("postgres"), autocommit=True) as c:
        c.execute('DROP DATABASE IF EXISTS "portalq_browser_bench" WITH (FORCE)')
        c.execute('CREATE DATABASE "portalq_browser_bench"')
    url = pg.url("portalq_browser_bench")
    upgrade(url)
    with psycopg.connect(libpq_dsn(url), autocommit=True) as c:  # open 24/7 for the bench
        c.execute("DELETE FROM portalq.portal_hours")
        c.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                  "SELECT code, d, '00:00', '00:00' FROM portalq.portals, generate_series(0, 6) d")
        c.execute("UPDATE portalq.portals SET holiday_country = NULL, holiday_subdiv = NULL, "
                  "cutoff_minutes = 0")
    os.environ["PORTALQ_DATABASE_URL"] = url
    settings = Settings(database_url=url, standin_url=standin_url, workers=1,
                        artifacts_dir=folder / "queued", node_id="bench")
    stop, ready = asyncio.Event(), asyncio.Event()
    service = asyncio.create_task(serve(settings, ready=ready, stop=stop, install_signals=False))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait([service, waiter], return_when=asyncio.FIRST_COMPLETED)
    if service.done():
        service.result()  # the service failed to start: raise its error
    out = []
    try:
        for i in range(runs + 1):
            t0 = time.perf_counter()
            job = await asyncio.to_thread(queue.enqueue, "obtain_ein", f"B{i}", payload(i, "q"))
            with psycopg.connect(libpq_dsn(url), autocommit=True) as c:
                c.execute("LISTEN bench")  # poll the row; 2 ms granularity
                while True:
                    status = c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                                       (job.id,)).fetchone()[0]
                    if status in ("completed", "failed"):
                        break
                    await asyncio.sleep(0.002)
            assert status == "completed", status
            print(f"queued run {i}: {time.perf_counter() - t0:.2f}s", flush=True)
            if i:
                out.append(time.perf_counter() - t0)
    finally:
        stop.set()
        await service
    return out


async def main() -> None:
    from portalq.portals.standin.server import StandinServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StandinServer() as standins:
        folder = Path(tmp)
        b = await bare(args.runs, standins.portal_urls(), folder)
        print(f"bare runs done: {[round(x, 2) for x in b]}", flush=True)
        q = await queued(args.runs, standins.base_url, folder)
    mb, mq = statistics.median(b), statistics.median(q)
    print(f"obtain_ein, median of {args.runs} (after 1 warm-up each)")
    print(f"  bare Playwright script      {mb * 1000:8.0f} ms  (min {min(b) * 1000:.0f})")
    print(f"  through portalq (queue+run) {mq * 1000:8.0f} ms  (min {min(q) * 1000:.0f})")
    print(f"  ratio portalq / bare        {mq / mb:8.2f}x  (target <= 1.2x)")


if __name__ == "__main__":
    asyncio.run(main())
