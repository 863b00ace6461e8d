"""The live view's frames (Chromium's screencast) never show a secret. The oracle reads the
frames' pixels where the secret is shown (an input, a review line: black text on white):
any dark pixel there is text. Without the secrets given (the control) the same frames do
show it, so the check can fail."""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

import pytest
from PIL import Image

from portalq.portals.flows.live import Frame, Screencast, live_forms

pytestmark = pytest.mark.browser

SSN = "123-45-6789"

# the review box starts blank (no dark placeholder text): a frame published before the echo
# would otherwise count as showing text -- under load a frame came between the page's
# content and the echo, and the test failed on a "-", not on the secret
PAGE = """<!doctype html><html><body style="font: 22px sans-serif; margin: 20px">
  <p>Untelling input: <input id="box" name="field7" size="14"
     style="font: 22px monospace; color: #000; background: #fff"></p>
  <p>By its name: <input id="ssn" name="applicant_ssn" size="14"
     style="font: 22px monospace; color: #000; background: #fff"></p>
  <p>Review: <b id="echo" style="display: inline-block; min-width: 200px">&nbsp;</b></p>
  <p>Changes: <span data-sensitive id="tick">0</span></p>
</body></html>"""


async def _cast(browser: Any, secrets: list[str], act: Any, watch: str,
                ) -> tuple[list[Frame], dict[str, float]]:
    """The frames published while ``act(page)`` runs and a little after: the page changes
    (a masked ticker) until three frames more have come, so the last one is of the page as
    ``act`` left it (Chromium keeps up to two in flight). Returns the frames and the box of
    the element ``watch``."""
    context = await browser.new_context(viewport={"width": 600, "height": 260})
    frames: list[Frame] = []

    async def publish(frame: Frame) -> None:
        frames.append(frame)

    cast = Screencast(context, secrets, publish, max_fps=60)
    try:
        await cast.start()
        page = await context.new_page()
        await page.set_content(PAGE)
        await act(page)
        box = await page.locator(watch).bounding_box()
        seen, deadline = len(frames), time.monotonic() + 15
        tick = 0
        while len(frames) < seen + 3:
            assert time.monotonic() < deadline, "no frames after the typing"
            tick += 1
            await page.evaluate("n => new Promise(r => { document.getElementById('tick')"
                                ".textContent = n; requestAnimationFrame(() => "
                                "requestAnimationFrame(r)); })", tick)
            await asyncio.sleep(0.02)
        assert box is not None
        return frames, box
    finally:
        await cast.stop()
        await context.close()


def _text_shown(frame: Frame, box: dict[str, float]) -> bool:
    """Dark pixels inside the box (its border and focus ring left out): text."""
    image = Image.open(io.BytesIO(frame.jpeg)).convert("L")
    inner = image.crop((int(box["x"]) + 5, int(box["y"]) + 5,
                        int(box["x"] + box["width"]) - 5, int(box["y"] + box["height"]) - 5))
    return inner.getextrema()[0] < 60


def _leaks(run: Any, browser: Any, secrets: list[str], act: Any, watch: str) -> int:
    frames, box = run(_cast(browser, secrets, act, watch))
    assert frames
    return sum(_text_shown(f, box) for f in frames)


def _fill(selector: str) -> Any:
    async def act(page: Any) -> None:   # what a flow does
        await page.fill(selector, SSN)
    return act


async def _echo(page: Any) -> None:   # a review page shows it
    await page.evaluate("s => document.getElementById('echo').textContent = s", SSN)


def _typed(selector: str) -> Any:
    async def act(page: Any) -> None:   # what a person does
        await page.click(selector)
        await page.keyboard.type(SSN, delay=60)
    return act


def test_a_filled_secret_is_in_no_frame(browser, run):
    assert _leaks(run, browser, [], _fill("#box"), "#box")   # control: seen unmasked
    assert not _leaks(run, browser, [SSN], _fill("#box"), "#box")


def test_a_secret_on_the_page_is_in_no_frame(browser, run):
    assert _leaks(run, browser, [], _echo, "#echo")
    assert not _leaks(run, browser, [SSN], _echo, "#echo")


def test_a_secret_typed_key_by_key_is_in_no_frame(browser, run):
    assert _leaks(run, browser, [], _typed("#box"), "#box")
    assert not _leaks(run, browser, [SSN], _typed("#box"), "#box")
    # an input named for an SSN is masked by its name, secrets given or not
    assert not _leaks(run, browser, [], _typed("#ssn"), "#ssn")


def test_live_forms_cover_prefixes_of_a_number():
    forms = live_forms([SSN])
    assert {"123-45-6789", "123456789", "123 45 6789", "1234", "123-4", "123-45-67"} <= set(forms)
    assert "123" not in forms and "123-" not in forms
