"""The console on a phone (issue 48, item 10): every page at 390 px wide in real Chromium
has no horizontal overflow (the page is no wider than the screen), the whole navigation
and the signed-in user's Sign out can be reached, a job's facts are not cut, and the jobs
list shows each job's status and error on the screen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consolekit import console_env, seed, sign_in_page

from portalq.jobs.business import order_runs
from tests.order_inputs import DELAWARE_LLC

pytestmark = pytest.mark.browser
WIDTH, HEIGHT = 390, 844
ORDER = "ORD-PHONE-1"
#: the navigation an admin sees
NAV = ("Overview", "Jobs", "Orders", "Needs you", "Escalations", "Portals", "Audit log", "Users")


def _prepare(dsn: str, artifacts: Any) -> dict[str, Any]:
    ids = seed(dsn, artifacts)
    with psycopg.connect(dsn, autocommit=True) as c:
        created = order_runs.enqueue_order("delaware_llc", ORDER, DELAWARE_LLC, conn=c)
    return {"ids": ids, "order": created}


@pytest.fixture(scope="module")
def env(pg_server, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with console_env(pg_server, tmp_path_factory.mktemp("phone-artifacts"),
                     _prepare) as found:
        yield found


@pytest.fixture
def phone(env, browser, run) -> Iterator[Any]:
    contexts: list[Any] = []

    def sign_in(role: str) -> Any:
        return run(sign_in_page(browser, env["base"], role, contexts,
                                viewport={"width": WIDTH, "height": HEIGHT}))

    yield sign_in
    for ctx in contexts:
        run(ctx.close())


#: the widest element of the page that sticks out to the right (what to look at when the
#: page is wider than the screen)
WIDEST = """() => {
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.right > innerWidth + 0.5 && r.width > 0) out.push([r.right, e.tagName + '.' +
        e.className + (e.id ? '#' + e.id : '')]);
  }
  out.sort((a, b) => b[0] - a[0]);
  return {scroll: document.documentElement.scrollWidth, client: innerWidth,
          widest: out.slice(0, 5)};
}"""


def _pages(env: dict[str, Any]) -> list[str]:
    ids = env["ids"]
    return ["/", "/jobs", "/jobs?status=failed", f"/jobs/{ids['ein']}", f"/jobs/{ids['name']}",
            f"/jobs/{ids['bc']}", f"/jobs/{ids['bc']}/edit", "/needs", "/escalations",
            "/portals", "/audit", "/users", "/orders", f"/orders/{ORDER}", "/orders/ORD-EIN-1",
            "/jobs/999999"]


def test_every_page_fits_a_390_px_screen(env, phone, run):
    page = phone("admin")
    wide: dict[str, Any] = {}
    for path in _pages(env):
        run(page.goto(path))
        found = run(page.evaluate(WIDEST))
        if found["scroll"] > WIDTH:
            wide[path] = found
    # the bulk action's preview, a page reached by a POST
    run(page.goto("/jobs?status=failed"))
    run(page.check(f"tr[data-job='{env['ids']['name']}'] input.pick"))
    run(page.fill("#bulk input[name=reason]", "the portal is back"))

    async def preview() -> None:
        async with page.expect_navigation():
            await page.click("#bulk button[type=submit]")
    run(preview())
    assert run(page.locator("#bulk-preview").count()) == 1
    found = run(page.evaluate(WIDEST))
    if found["scroll"] > WIDTH:
        wide["bulk preview"] = found
    assert wide == {}, "\n".join(f"{p}: {w}" for p, w in wide.items())
    assert page.csp_errors == []


def test_the_sign_in_page_fits_a_390_px_screen(env, browser, run):
    async def go() -> int:
        ctx = await browser.new_context(base_url=env["base"],
                                        viewport={"width": WIDTH, "height": HEIGHT})
        try:
            page = await ctx.new_page()
            await page.goto("/login")
            return int(await page.evaluate("document.documentElement.scrollWidth"))
        finally:
            await ctx.close()

    assert run(go()) <= WIDTH


def _on_screen(run, locator: Any) -> bool:
    box = run(locator.bounding_box())
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= WIDTH + 0.5


def test_every_link_of_the_navigation_and_sign_out_are_on_the_screen(env, phone, run):
    page = phone("admin")
    links = page.locator("header.top nav a")
    names = run(links.all_inner_texts())
    for name in NAV:
        assert any(n.startswith(name) for n in names), (name, names)
    for i in range(run(links.count())):
        assert _on_screen(run, links.nth(i)), names[i]
    assert _on_screen(run, page.locator("header.top .who span"))
    sign_out = page.locator("header.top .who button")
    assert _on_screen(run, sign_out)

    async def out() -> None:
        async with page.expect_navigation():
            await sign_out.click()
    run(out())
    assert "/login" in page.url


def test_a_jobs_facts_and_the_jobs_lists_status_and_error_are_on_the_screen(env, phone, run):
    page = phone("operator")
    ein = env["ids"]["ein"]
    run(page.goto(f"/jobs/{ein}"))
    facts = page.locator("dl.facts").first
    assert _on_screen(run, facts)
    for i in range(run(facts.locator("dd").count())):
        assert _on_screen(run, facts.locator("dd").nth(i)), i
    run(page.goto("/jobs?status=failed"))
    row = page.locator(f"tr[data-job='{ein}']")
    assert _on_screen(run, row.locator(".badge"))
    assert _on_screen(run, row.locator("td.what"))
    assert "did not answer" in run(row.locator("td.what").inner_text())
