"""Screenshots of the console's "Needs you" page and of an approval (issue 39) for
docs/console/ at 1440 and 390 px (real Chromium via Playwright).

    .venv/bin/python tools/needs_screenshots.py [OUT_DIR]

The scratch database and console of tools/console_screenshots.py; what needs a person as
tests/needs_seed.py writes it (a question, an approval stopped at its review page, an
uncertain EIN filing, a Delaware filing past its expected time, fifty jobs failed by one
IRS outage); an operator signed in.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import console_screenshots as shots  # noqa: E402

from portalq.jobs.admin import users as console_users  # noqa: E402
from tests.needs_seed import seed  # noqa: E402

REVIEW = """<body style="font-family:sans-serif;margin:0">
<div style="background:#26374a;color:#fff;padding:14px 20px;font-size:20px">CRTC — Unsolicited
Telecommunications Rules registration (stand-in)</div><div style="padding:20px">
<h2>Review your registration</h2><p>Organisation: Maple Leaf Widgets Ltd.</p>
<p>Contact: Ada Lovelace, ops@example.com</p><p>Telemarketing on behalf of: itself</p>
<p>Attached: registration-letter.txt (1,204 bytes)</p>
<p><button>Submit Registration</button></p></div></body>"""


async def review_png() -> bytes:
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import launch, load_config

    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        page = await browser.new_page(viewport={"width": 1000, "height": 560})
        await page.set_content(REVIEW)
        data = await page.screenshot()
        await browser.close()
    return data


async def shoot(base: str, ids: dict[str, object], out: Path) -> None:
    from playwright.async_api import async_playwright

    from portalq.portals.flows.browser import launch, load_config

    async with async_playwright() as pw:
        browser = await launch(pw, load_config())
        async for width, page in shots.signed_in(browser, base):
            await page.goto("/needs")
            await page.screenshot(path=str(out / f"needs-{width}.png"), full_page=True)
            await page.goto(f"/jobs/{ids['approval']}")
            await page.screenshot(path=str(out / f"approval-{width}.png"))
        await browser.close()
    print(f"screenshots in {out}")


def main() -> None:
    import psycopg

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "console")
    out.mkdir(parents=True, exist_ok=True)
    dsn = shots.database()
    artifacts = Path(tempfile.mkdtemp(prefix="portalq-needs-shots-"))
    with psycopg.connect(dsn, autocommit=True) as c:
        console_users.add_user(c, "olivia", "operator", shots.PASSWORD)
    ids = seed(dsn, artifacts, outage=50, tag="DOC", review_png=asyncio.run(review_png()))
    shots.serve_console(dsn, lambda base: shoot(base, ids, out), artifacts=artifacts)

if __name__ == "__main__":
    main()
