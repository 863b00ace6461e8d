"""A flow that stops to wait (an approval at the review page, a portal still deciding) is
not failing: its page is kept as the evidence of the wait, never named a failure (issue 39
item 6: a job waiting for approval showed ``04-failure.png``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portalq.jobs import clock
from portalq.jobs.errors import DeferUntil, RetryableError
from portalq.portals.flows.base import browser_page

pytestmark = pytest.mark.browser


def test_a_wait_keeps_a_deferred_shot_and_a_failure_a_failure_shot(run, make_ctx,
                                                                   ein_payload):
    async def flow(ctx, outcome: Exception) -> None:
        async with browser_page(ctx) as (page, _evidence):
            await page.set_content("<h1>Review your registration</h1>")
            raise outcome

    waits = make_ctx("obtain_ein", ein_payload())
    with pytest.raises(DeferUntil):
        run(flow(waits, DeferUntil("waiting for approval at the review page",
                                   when=clock.now() + timedelta(days=7))))
    assert [p.name for p in waits.artifacts_dir.glob("*.png")] == ["01-deferred.png"]

    fails = make_ctx("obtain_ein", ein_payload())
    with pytest.raises(RetryableError):
        run(flow(fails, RetryableError("the page did not load")))
    assert [p.name for p in fails.artifacts_dir.glob("*.png")] == ["01-failure.png"]
