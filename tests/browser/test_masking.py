"""Screenshots mask secret values wherever a page shows them, whatever its markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from portalq.portals.flows.base import MASK_ATTR, mark_secrets, masked_screenshot, unmark_secrets

pytestmark = pytest.mark.browser

A, B = "123-45-6789", "987-65-4321"   # same shape: pages differ only where the secret is


def _page_html(secret: str) -> str:
    digits = secret.replace("-", "")
    spaced = secret.replace("-", " ")
    frame = f"<p style='font:20px sans-serif'>In a frame: {secret}</p>"
    return f"""<!doctype html><html><body style="font: 20px sans-serif; margin: 20px">
      <p id="text">Responsible party SSN: <b>{secret}</b></p>
      <p>Untelling input: <input id="box" name="field7" size="14"></p>
      <p><span id="titled" title="{spaced}">hover for the number</span>
         <button id="labelled" aria-label="taxpayer {digits}">?</button></p>
      <table border="1"><tr><td>Tax ID</td><td id="cell">{digits}</td></tr></table>
      <iframe id="frame" srcdoc="{frame}" style="width:400px;height:70px"></iframe>
      <p><select id="pick"><option>choose</option><option selected>{spaced}</option>
         </select></p>
    </body></html>"""


async def _shot(browser, tmp: Path, secret: str, *, by_value: bool) -> bytes:
    context = await browser.new_context(viewport={"width": 700, "height": 500})
    try:
        page = await context.new_page()
        await page.set_content(_page_html(secret))
        await page.frame_locator("#frame").locator("p").wait_for()
        await page.fill("#box", secret.replace("-", ""))   # an input's value, not markup
        path = tmp / f"{secret}-{by_value}.png"
        assert await masked_screenshot(page, path, [secret] if by_value else [])
        assert await page.locator(f"[{MASK_ATTR}]").count() == 0   # marks removed after
        return path.read_bytes()
    finally:
        await context.close()


def test_secret_shown_six_ways_is_masked_everywhere(browser, run, tmp_path):
    # control: with only the CSS selectors, the two pages' screenshots differ (the secret
    # is visible), so the comparison below can fail
    assert run(_shot(browser, tmp_path, A, by_value=False)) != run(
        _shot(browser, tmp_path, B, by_value=False))
    # masked by value: pixel for pixel the same page, whichever secret it shows
    assert run(_shot(browser, tmp_path, A, by_value=True)) == run(
        _shot(browser, tmp_path, B, by_value=True))


def test_every_element_carrying_the_secret_is_marked(browser, run):
    async def marked() -> tuple[set[str], set[str]]:
        context = await browser.new_context()
        try:
            page = await context.new_page()
            await page.set_content(_page_html(A))
            await page.frame_locator("#frame").locator("p").wait_for()
            await page.fill("#box", A.replace("-", ""))
            await mark_secrets(page, [A])
            top = set(await page.eval_on_selector_all(
                f"[{MASK_ATTR}]", "els => els.map(e => e.id || e.tagName)"))
            inner = set(await page.frames[1].eval_on_selector_all(
                f"[{MASK_ATTR}]", "els => els.map(e => e.tagName)"))
            await unmark_secrets(page)
            return top, inner
        finally:
            await context.close()

    top, inner = run(marked())
    assert {"box", "titled", "labelled", "cell", "pick"} <= top and "B" in top
    assert "body" not in {t.lower() for t in top}   # the innermost elements, not the page
    assert inner == {"P"}
