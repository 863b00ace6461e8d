"""The flow toolkit reads single-page apps (portals.flows.base.AppWatch): a step ends when
the app shows its next state; an inline answer is an answer, never a timeout; a wait is an
outage sign only when the portal itself failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from portalq.jobs.errors import PortalUnavailable
from portalq.portals.flows.base import ConnectionLost, NoNextState, click_and_settle
from portalq.scheduler.outcomes import is_outage_sign

pytestmark = pytest.mark.browser

APP = """<!doctype html><html><body><main>
<div class="stepIndicator-wrapper"><h2 class="stepIndicator-heading">Step 1of 6: Legal
Structure</h2></div><div aria-live="polite" id="alert"></div>
<button id="go">Continue</button></main><script>
const A = {
  route: () => history.pushState({}, '', '/app/next'),
  step: () => document.querySelector('.stepIndicator-heading').textContent = 'Step 2of 6: Identity',
  answer: async () => { const r = await fetch('/api/answer', {method: 'POST'});
    document.getElementById('alert').innerHTML = '<div><h2>' + await r.text() + '</h2></div>'; },
  dialog: () => { const d = document.createElement('div'); d.setAttribute('role', 'dialog');
    d.textContent = 'Do you need more time?'; document.body.appendChild(d); },
  download: () => { const a = document.createElement('a');
    a.href = 'data:application/pdf;base64,JVBERi0xLjQK'; a.download = 'letter.pdf';
    document.body.appendChild(a); a.click(); },
  nothing: () => {},
  pending: () => fetch('/api/hang', {method: 'POST'}),
  failing: () => fetch('/api/fail', {method: 'POST'}),
  error5xx: () => fetch('/api/5xx', {method: 'POST'}),
  answered: () => fetch('/api/answer', {method: 'POST'}),
};
document.getElementById('go').onclick = () => A[location.hash.slice(1)]();
</script></body></html>"""


def settle(run: Any, browser: Any, behaviour: str, timeout_ms: float = 1500) -> str:
    async def scenario() -> str:
        context = await browser.new_context(accept_downloads=True)
        try:
            page = await context.new_page()

            async def serve(route: Any) -> None:
                url = route.request.url
                if url.endswith("/api/hang"):
                    await asyncio.sleep(5)
                    await route.fulfill(status=200, body="late")
                elif url.endswith("/api/fail"):
                    await route.abort("connectionreset")
                elif url.endswith("/api/5xx"):
                    await route.fulfill(status=503, body="down")
                elif url.endswith("/api/answer"):
                    await route.fulfill(status=200, body="We are unable to provide you with "
                                        "an EIN.")
                else:
                    await route.fulfill(status=200, content_type="text/html", body=APP)

            await page.route("http://app.test/**", serve)
            await page.goto(f"http://app.test/app/#{behaviour}")
            return await click_and_settle(page, page.locator("#go"), "Continue",
                                          timeout_ms=timeout_ms)
        finally:
            await context.close()

    return str(run(scenario()))


@pytest.mark.parametrize("behaviour", ["route", "step", "answer", "dialog", "download"])
def test_the_next_state_ends_the_step(run, browser, behaviour):
    assert settle(run, browser, behaviour, timeout_ms=10_000) == behaviour


def test_nothing_new_with_every_request_answered_is_a_changed_app(run, browser):
    for behaviour in ("nothing", "answered"):
        with pytest.raises(NoNextState) as info:
            settle(run, browser, behaviour)
        assert not is_outage_sign(info.value)


@pytest.mark.parametrize("behaviour", ["pending", "failing", "error5xx"])
def test_a_wait_is_an_outage_sign_only_when_the_portal_failed(run, browser, behaviour):
    with pytest.raises(PortalUnavailable) as info:
        settle(run, browser, behaviour)
    assert is_outage_sign(info.value) and not isinstance(info.value, ConnectionLost)
