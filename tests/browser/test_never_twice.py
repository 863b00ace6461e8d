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
