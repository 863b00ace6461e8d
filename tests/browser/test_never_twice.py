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
