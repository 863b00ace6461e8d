"""process_crtc against the CRTC registration stand-in, in real Chromium."""

from __future__ import annotations

import hashlib
import re

import pytest
from bckit import CRTC, CRTC_PAYLOAD, build, crash_after_checkpoint
from flowkit import inflate_all

from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError
from portalq.portals.flows.crtc import process_crtc
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser


def crtc_ctx(make_ctx, traced=False, **overrides):
    """Traced per playwright.config only where asked: tracing is tested elsewhere and costs."""
    return make_ctx("process_crtc", build(CRTC_PAYLOAD, **overrides),
                    trace_policy=None if traced else "off")


def test_registration_end_to_end(run, portals, make_ctx):
    ctx = crtc_ctx(make_ctx, traced=True)
    result = run(process_crtc(ctx))

    number = result["confirmation"]
    assert re.fullmatch(r"CRTC-\d{4}-\d{6}", number)
    [(name, content_type, pdf)] = ctx.documents.by_job[ctx.job_id]
    assert result["documents"] == [name] and content_type == "application/pdf"
    assert pdf.startswith(b"%PDF-")
    text = inflate_all(pdf)
    assert number.encode() in text and b"Cedar Harbour Telecom Ltd." in text
    [entry] = portals.ledger(CRTC)
    assert entry["confirmation"] == number and entry["services"] == ["reseller", "voip"]
    assert entry["province"] == "BC" and entry["contact"] == "Ann Lee"
    letter = CRTC_PAYLOAD["letter_text"].encode()
    assert entry["letter"]["sha256"] == hashlib.sha256(letter).hexdigest()
    assert entry["reference"] == record(ctx.checkpoints, "crtc_registration").reference
    assert state(ctx.checkpoints, "crtc_registration") == "confirmed"
    assert record(ctx.checkpoints, "crtc_registration").confirmation["confirmation"] == number
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-cover-page.png", "02-documents.png", "03-confirmation.png"]


@pytest.mark.parametrize("faults, outcome, message", [
    ({"hours": "closed"}, PortalClosed, "crtc closed"),
    ({"maintenance": True}, PortalClosed, "maintenance"),
    ({"error_code": "502", "error_times": 1}, RetryableError, "system error 502"),
    ({"expire_session": True}, RetryableError, "session expired"),
    ({"changed_selector": True}, RetryableError, "no button 'Continue'.*portal changed"),
])
def test_faults_map_to_outcomes(run, portals, make_ctx, faults, outcome, message):
    portals.control(CRTC, **faults)
    with pytest.raises(outcome, match=message) as info:
        run(process_crtc(crtc_ctx(make_ctx)))
    if outcome is PortalClosed:
        assert info.value.outage == ("maintenance" in faults)
    assert portals.ledger(CRTC) == []


def test_dialog_is_accepted(run, portals, make_ctx):
    portals.control(CRTC, dialog=True)
    assert run(process_crtc(crtc_ctx(make_ctx)))["confirmation"]
    assert len(portals.ledger(CRTC)) == 1


def test_answer_lost_after_submit_is_reconciled(run, portals, make_ctx):
    portals.control(CRTC, drop_after_submit=True)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(process_crtc(ctx))
    assert state(ctx.checkpoints, "crtc_registration") == "submitting"
    assert not record(ctx.checkpoints, "crtc_registration").confirmation

    portals.control(CRTC, drop_after_submit=False)
    result = run(process_crtc(ctx.retry()))
    [entry] = portals.ledger(CRTC)  # submitted exactly once
    assert result == {"confirmation": entry["confirmation"], "reconciled": True,
                      "documents": [f"{entry['confirmation']}-confirmation-letter.pdf"]}


def test_retry_after_confirmation_does_not_resubmit(run, portals, make_ctx):
    ctx = crtc_ctx(make_ctx)
    # the attempt dies right after recording the confirmation, before the letter is kept
    crash_after_checkpoint(ctx, portals, "confirmed:crtc_registration", portal=CRTC,
                           maintenance=True)
    with pytest.raises(PortalClosed):
        run(process_crtc(ctx))
    portals.control(CRTC, maintenance=False)
    result = run(process_crtc(ctx.retry()))
    [entry] = portals.ledger(CRTC)
    assert result["confirmation"] == entry["confirmation"] == record(
        ctx.checkpoints, "crtc_registration").confirmation["confirmation"]
    assert ctx.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")


def test_system_error_then_retry_submits_once(run, portals, make_ctx):
    portals.control(CRTC, error_code="SYSTEM_UNAVAILABLE", error_times=1)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="SYSTEM_UNAVAILABLE"):
        run(process_crtc(ctx))
    result = run(process_crtc(ctx.retry()))
    [entry] = portals.ledger(CRTC)
    assert entry["confirmation"] == result["confirmation"] and result["reconciled"] is False


def test_portal_rules_are_business_errors(run, portals, make_ctx):
    with pytest.raises(BusinessError, match="province .WA. is not a Canadian province"):
        run(process_crtc(crtc_ctx(make_ctx, province="WA")))
    assert portals.ledger(CRTC) == []
