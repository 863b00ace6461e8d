"""Screenshots of the console's evidence and search pages (issue 39) for docs/console/ at
1440 and 390 px (real Chromium via Playwright): a failed job (its failure screenshot beside
the error), the trace viewer opening that job's trace, a job waiting on a question, and a
payload search's results.

    .venv/bin/python tools/evidence_screenshots.py [OUT_DIR]

The scratch database and console of tools/console_screenshots.py; what needs a person as
tests/needs_seed.py writes it (twenty jobs failed by one IRS outage among them); two
thousand demo-like filings with legal names; for one failed EIN job, a real trace and
failure screenshot recorded by a traced context (the flows' own ``new_context`` and
``close_context``) on a stand-in IRS page, kept as the worker keeps them. Every page is
checked for the jobs' SSN in every written form before it is shot.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

# the deployment is a formation firm applying as the IRS third-party designee (the seeded
# obtain_ein jobs name none), as the test suite's configuration says
for _name, _value in {"NAME": "Example Formation Partners LLC", "STREET": "8 Filing Row",
                      "CITY": "Dover", "STATE": "DE", "ZIP": "19904",
                      "PHONE": "302-555-0177"}.items():
    os.environ.setdefault(f"PORTALQ_IRS_DESIGNEE_{_name}", _value)

import console_screenshots as shots  # noqa: E402

from portalq.jobs import clock, worker_api  # noqa: E402
from portalq.jobs.admin import users as console_users  # noqa: E402
from tests.needs_seed import seed  # noqa: E402

SSN = re.compile(r"123[\s.-]*45[\s.-]*6789")
NAMES = ("Maple Leaf Widgets", "Harbour Light Foods", "Northwind Traders", "Blue Heron Studio",
         "Cedar & Pine Carpentry", "Maple Ridge Dental", "Granite Peak Outfitters",
         "Lakeside Bakery", "Sunrise Logistics", "Maplewood Analytics")
IRS_PAGE = """<body style="font-family:sans-serif;margin:0">
<div style="background:#003366;color:#fff;padding:14px 20px;font-size:20px">EIN Assistant
(stand-in)</div><div style="padding:20px"><h2>Review and submit</h2>
<p>Legal name: Harbour Light Foods LLC</p><p>Responsible party: Ada Lovelace</p>
<button id="submit" onclick="document.getElementById('out').textContent =
'503 Service Unavailable: the EIN Assistant is not available right now. Try again later.'">
Submit EIN Request</button><p id="out" style="color:#b00;font-weight:bold"></p></div></body>"""


def filings(dsn: str) -> None:
    """Two thousand finished filings with demo-like legal names, older than what needs a
    person (the search's results)."""
    now = clock.now()
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                           attempts, created_at, updated_at, finished_at)
            SELECT 'file_entity', 'ORD-' || (5000 + g), 'delaware_icis',
                   jsonb_build_object('legal_name', (%(names)s::text[])[1 + g %% 10] || ' '
                                      || (ARRAY['LLC', 'Inc.', 'Ltd.'])[1 + g %% 3]),
                   CASE WHEN g %% 37 = 0 THEN 'failed' ELSE 'completed' END, %(now)s, 1,
                   %(now)s - (2001 - g) * interval '7 minutes', %(now)s,
                   %(now)s - (2001 - g) * interval '7 minutes' + interval '3 minutes'
            FROM generate_series(1, 2000) g""", {"names": list(NAMES), "now": now})


async def trace_failure(dsn: str, artifacts: Path, job_id: int) -> None:
    """A real traced attempt of ``job_id`` that failed at the portal: its trace and
    failure screenshot recorded, and registered, as the worker does it."""
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import (
        BrowserConfig,
        close_context,
        launch,
        load_config,
        new_context,
    )
    from portalq.scheduler.evidence import evidence_in, kind_of, run_folder

    folder = run_folder(artifacts / str(job_id), 5)
    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        context = await new_context(browser, BrowserConfig(trace_policy="on"), folder,
                                    viewport={"width": 1000, "height": 560})
        page = await context.new_page()
        await page.set_content(IRS_PAGE)
        await page.get_by_role("button", name="Submit EIN Request").click()
        await page.locator("#out").get_by_text("503").wait_for()
        await page.screenshot(path=str(folder / "04-failure.png"))
        await close_context(context, failed=True)
        await browser.close()
    files, _ = evidence_in(folder)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        for path in files:
            await worker_api.add_artifact(c, job_id=job_id, attempt=5, kind=kind_of(path),
                                          path=str(path))


async def shoot(base: str, ids: dict[str, Any], out: Path) -> None:
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import launch, load_config

    failed = ids["outage"][0]
    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        async for width, page in shots.signed_in(browser, base):
            async def shot(name: str, full: bool = False, page: Any = page,
                           width: int = width) -> None:
                text = await page.content()
                assert not SSN.search(text), f"an SSN on {page.url}"
                await page.screenshot(path=str(out / f"{name}-{width}.png"), full_page=full)

            await page.goto(f"/jobs/{failed}")
            await shot("failed")
            await page.goto(f"/jobs/{ids['question']}")
            await shot("question")
            await page.goto("/jobs?field=legal_name&value=maple+ri")
            await shot("search")
            await page.goto(f"/jobs/{failed}")
            await page.locator(".trace-viewer a").click()
            await page.get_by_test_id("actions-tree").get_by_text("Submit EIN Request") \
                .first.wait_for()
            await shot("trace")
        await browser.close()
    print(f"screenshots in {out}")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "console")
    out.mkdir(parents=True, exist_ok=True)
    dsn = shots.database()
    artifacts = Path(tempfile.mkdtemp(prefix="portalq-evidence-shots-"))
    with psycopg.connect(dsn, autocommit=True) as c:
        console_users.add_user(c, "olivia", "operator", shots.PASSWORD)
    filings(dsn)
    ids = seed(dsn, artifacts, outage=20, tag="DOC")
    asyncio.run(trace_failure(dsn, artifacts, ids["outage"][0]))
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("ANALYZE portalq.job_queue")
    shots.serve_console(dsn, lambda base: shoot(base, ids, out), artifacts=artifacts)

if __name__ == "__main__":
    main()
