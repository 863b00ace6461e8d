"""The browser never repeats a point of no return (issue 53, item 5): a stand-in that acts on
a submitting request and then loses the connection with no answer (the kit's
``drop_after_acting``, a bare close as a real network gives) is reached once per submission
-- Chromium's own resend of the POST never happens -- and the job goes the lost-answer way."""

from __future__ import annotations

import pytest

from portalq.jobs.errors import UncertainOutcome
from portalq.portals.delaware.flow import file_entity_de
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser


def ends_found(run, flow, number: str) -> None:
    """The retry's lookup finds the one filing: the job ends with the registry's number."""
    assert run(flow)[number]


def test_delaware_payment_dropped_after_acting_reaches_the_portal_once(
        run, portals, make_ctx, de_payload):
    portals.control("delaware_icis", drop_after_acting="/api/e-filing")
    ctx = make_ctx("file_entity", de_payload())
    with pytest.raises(UncertainOutcome) as lost:
        run(file_entity_de(ctx))
    assert portals.arrivals("delaware_icis") == {"/delaware/api/e-filing": 1}
    [entry] = portals.ledger("delaware_icis")            # one filing, one payment
    assert entry["payment"]["amount"] == "$110.00"
    assert "may have been taken and paid" in str(lost.value)
    assert state(ctx.checkpoints, "formation") == "submitting"
    reference = record(ctx.checkpoints, "formation").reference
    assert list(ctx.checkpoints["sent"][reference]) == ["POST /delaware/api/e-filing"]


def test_irs_submit_dropped_after_acting_reaches_the_irs_once(
        run, portals, make_ctx, ein_payload):
    from portalq.portals.irs.flow import obtain_ein

    portals.control("irs_ein", drop_after_acting="/applyein/api/application")
    ctx = make_ctx("obtain_ein", ein_payload())
    with pytest.raises(UncertainOutcome):
        run(obtain_ein(ctx))
    assert portals.arrivals("irs_ein").get("/irs/applyein/api/application") == 1
    assert len(portals.ledger("irs_ein")) == 1           # one application
    assert state(ctx.checkpoints, "ein_application") == "submitting"


def test_crtc_submit_dropped_after_acting_reaches_the_crtc_once(run, portals, make_ctx):
    from bckit import CRTC_PAYLOAD, build

    from portalq.portals.crtc.flow import process_crtc

    portals.control("crtc", drop_after_acting="/register/documents")
    ctx = make_ctx("process_crtc", build(CRTC_PAYLOAD), trace_policy="off")
    with pytest.raises(Exception) as lost:   # noqa: PT011 - whichever way the flow says "unknown"
        run(process_crtc(ctx))
    assert portals.arrivals("crtc").get("/crtc/register/documents") == 1
    assert len(portals.ledger("crtc")) == 1               # one registration
    assert state(ctx.checkpoints, "crtc_registration") == "submitting", lost.value
    portals.control("crtc", drop_after_acting=None)
    ends_found(run, process_crtc(ctx.retry()), "confirmation")   # its lookup finds it
    assert len(portals.ledger("crtc")) == 1


@pytest.mark.parametrize(("path", "submission", "paid"), [
    # the creation: the NR's number came only with the lost answer -- a person, never a
    # second NR (namex creates it unpaid)
    ("/nr/applicant", "name_request", False),
    # the payment: renumbered at its payment -- a person, never a second payment
    ("/nr/payment", "nr_payment", True),
])
def test_bc_name_request_dropped_after_acting_reaches_the_registry_once(
        run, portals, make_ctx, path, submission, paid):
    from bckit import BC, MONDAY_10_PT, NAME_SEARCH, build, entries

    from portalq.jobs.clock import FrozenClock, set_clock
    from portalq.portals.bc.flow import name_search

    set_clock(FrozenClock(MONDAY_10_PT))   # PayBC's hours
    portals.control(BC, drop_after_acting=path)
    ctx = make_ctx("name_search", build(NAME_SEARCH, names=["Cedar Harbour Consulting Ltd."]),
                   trace_policy="off")
    with pytest.raises(Exception):   # noqa: B017,PT011 - whichever way the flow says "unknown"
        run(name_search(ctx))
    assert portals.arrivals(BC).get(f"/bc{path}") == 1
    [nr] = entries(portals, BC, "name_request")           # one NR, paid at most once
    assert bool(nr["payment"]) is paid
    assert state(ctx.checkpoints, submission) == "submitting"
    portals.control(BC, drop_after_acting=None)
    with pytest.raises(UncertainOutcome):
        run(name_search(ctx.retry()))
    assert portals.arrivals(BC).get(f"/bc{path}") == 1
    assert len(entries(portals, BC, "name_request")) == 1


def test_bc_file_and_pay_dropped_after_acting_reaches_the_registry_once(
        run, portals, make_ctx):
    from bckit import ANN, BC, FILE_ENTITY, MONDAY_10_PT, build, entries

    from portalq.jobs.clock import FrozenClock, set_clock
    from portalq.jobs.waiting import WaitOnPortal
    from portalq.portals.bc.flow import file_entity_bc

    set_clock(FrozenClock(MONDAY_10_PT))   # PayBC's hours
    portals.control(BC, drop_after_acting="/inc/step/5")
    ctx = make_ctx("file_entity", build(FILE_ENTITY, directors=[ANN]), trace_policy="off")
    with pytest.raises(Exception):   # noqa: B017,PT011 - whichever way the flow says "unknown"
        run(file_entity_bc(ctx))
    assert portals.arrivals(BC).get("/bc/inc/step/5") == 1
    [filing] = entries(portals, BC, "incorporation")      # one filing, saved before PayBC
    assert filing["payment"] is None
    assert state(ctx.checkpoints, "incorporation") == "submitting"
    portals.control(BC, drop_after_acting=None)
    try:   # the dashboard shows it saved, unpaid: paid from there, once
        run(file_entity_bc(ctx.retry()))
    except WaitOnPortal:
        pass   # paid; the registry completes it later
    assert portals.arrivals(BC).get("/bc/inc/step/5") == 1
    [filing] = entries(portals, BC, "incorporation")
    assert filing["payment"]["amount"] == "$350.00"


def test_a_second_identical_request_is_stopped_before_it_leaves(
        run, portals, make_ctx, de_payload):
    """The page itself posting the payment again -- in the same attempt, or in a later one
    of the same submission -- never reaches the portal: one arrival."""
    from portalq.portals.flows.base import browser_page

    ctx = make_ctx("file_entity", de_payload())
    api = f"{ctx.portal_urls['delaware_icis'].rstrip('/')}/api/e-filing"
    post = "(url) => fetch(url, {method: 'POST', body: new FormData()}).then(r => r.status, " \
           "e => 'stopped: ' + e.message)"

    async def twice(c) -> list[object]:
        sub = c.submission("formation")
        async with browser_page(c) as (page, _):
            await page.goto(ctx.portal_urls["delaware_icis"])
            async with sub:   # started before anything leaves, as a flow does
                return [await page.evaluate(post, api), await page.evaluate(post, api)]

    first, second = run(twice(ctx))
    assert first == 401 and str(second).startswith("stopped: ")   # the session, not ours
    assert portals.arrivals("delaware_icis") == {"/delaware/api/e-filing": 1}
    later = ctx.retry()                                    # the same submission, in doubt
    assert all(str(r).startswith("stopped: ") for r in run(twice(later)))
    assert portals.arrivals("delaware_icis") == {"/delaware/api/e-filing": 1}
