"""process_crtc against the CRTC registration stand-in, in real Chromium."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from bckit import CRTC, CRTC_PAYLOAD, build, crash_after_checkpoint
from flowkit import inflate_all

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError, UncertainOutcome
from portalq.jobs.waiting import WaitOnPortal
from portalq.portals.crtc.flow import process_crtc
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser


def crtc_ctx(make_ctx, traced=False, **overrides):
    """Traced per playwright.config only where asked: tracing is tested elsewhere and costs."""
    return make_ctx("process_crtc", build(CRTC_PAYLOAD, **overrides),
                    trace_policy=None if traced else "off")


def test_registration_end_to_end(run, portals, make_ctx):
    ctx = crtc_ctx(make_ctx, traced=True, address={
        "street": "1 Harbour Way", "city": "Victoria", "region": "BC", "postal_code": "V8W 1A1",
        "country": "CA"})
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
    # the registration letter: a PDF built from the payload, with what the CRTC asks for
    letter = base64.b64decode(entry["letter"]["content"])
    assert entry["letter"]["filename"] == "registration-letter.pdf"
    assert letter.startswith(b"%PDF-")
    text = b" ".join(re.sub(rb"\\(.)", rb"\1", m) for m in
                     re.findall(rb"\(((?:\\.|[^\\)])*)\) '", letter))
    assert entry["letter"]["sha256"] == hashlib.sha256(letter).hexdigest()
    for words in (b"Legal name: Cedar Harbour Telecom Ltd. (incorporation number BC1234567",
                  b"Address: 1 Harbour Way, Victoria, BC V8W 1A1, CA",
                  b"non-facilities-based provider",
                  b"registration list(s): Reseller of Telecommunications Services.",
                  CRTC_PAYLOAD["letter_text"][:60].encode(),
                  b"acknowledges the obligations"):
        assert words in text, words
    assert entry["reference"] == record(ctx.checkpoints, "crtc_registration").reference
    assert state(ctx.checkpoints, "crtc_registration") == "confirmed"
    assert record(ctx.checkpoints, "crtc_registration").confirmation["confirmation"] == number
    shots = sorted(p.name for p in ctx.artifacts_dir.glob("*.png"))
    assert shots == ["01-cover-page.png", "02-documents.png", "03-confirmation.png",
                     "04-registration-list.png"]


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
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", result.pop("listed_on"))
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


def test_system_error_then_waits_never_submits_again(run, portals, make_ctx):
    # an error page after the click: the outcome is unknown and the CRTC's "not found" is
    # not conclusive (portals/lookups.py): the job waits, then a person -- never a 2nd filing
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(CRTC, error_code="SYSTEM_UNAVAILABLE", error_times=1)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="SYSTEM_UNAVAILABLE"):
        run(process_crtc(ctx))
    retry = ctx.retry()
    with pytest.raises(WaitOnPortal, match="^waiting on crtc since "):
        run(process_crtc(retry))
    clock.advance(hours=49)
    with pytest.raises(UncertainOutcome, match="was lost"):
        run(process_crtc(retry.retry()))
    assert portals.ledger(CRTC) == []


def test_dropped_answer_while_queued_waits_and_registers_once(run, portals, make_ctx):
    """The answer is lost right after the click while CRTC staff keep the submission queued
    for a day: the search says "not found" meanwhile; the job waits, never submits again,
    and ends with the registry's number and letter once staff process it."""
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(CRTC, drop_after_submit=True, decide_after_seconds=24 * 3600)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(RetryableError, match="outcome unknown"):
        run(process_crtc(ctx))
    portals.control(CRTC, drop_after_submit=False)
    attempt = ctx
    for hours in (1, 5, 12):
        clock.advance(hours=hours)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal):
            run(process_crtc(attempt))
        assert len(portals.ledger(CRTC)) == 1
    clock.advance(hours=7)
    done = attempt.retry()
    result = run(process_crtc(done))
    [entry] = portals.ledger(CRTC)
    assert result["confirmation"] == entry["confirmation"] and result["reconciled"] is True
    assert done.checkpoints["waiting"] is None


def test_dated_receipt_is_recorded_then_waits_for_staff(run, portals, make_ctx):
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(CRTC, decide_after_seconds=3600)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(WaitOnPortal, match="CRTC staff to process CRTC-") as info:
        run(process_crtc(ctx))
    [entry] = portals.ledger(CRTC)
    assert record(ctx.checkpoints, "crtc_registration").confirmation == {
        "confirmation": entry["confirmation"], "received": entry["received"]}
    mark = ctx.checkpoints["waiting"]
    assert mark["expected_by"] > mark["since"] and info.value.when > clock.instant
    clock.advance(hours=1, seconds=1)
    last = ctx.retry()
    result = run(process_crtc(last))
    assert result["confirmation"] == entry["confirmation"] and len(portals.ledger(CRTC)) == 1
    # both decisions kept for the ETA: the letter (seen at the check after an hour) and the
    # public list (seen in the same run as the letter: between the letter and that read)
    decided = last.checkpoints["decided"]
    assert set(decided) == {"crtc_registration", "crtc_listing"}
    letter = decided["crtc_registration"]
    assert (letter["since"], letter["last_check"]) == (mark["since"], mark["last_check"])
    assert letter["seen"] == clock.instant.isoformat()
    assert decided["crtc_listing"]["since"] == clock.instant.isoformat()


def test_portal_rules_are_business_errors(run, portals, make_ctx):
    with pytest.raises(BusinessError, match="province .WA. is not a Canadian province"):
        run(process_crtc(crtc_ctx(make_ctx, province="WA")))
    assert portals.ledger(CRTC) == []


def test_no_registration_list_is_a_business_error_before_anything_is_sent(
        run, portals, make_ctx):
    with pytest.raises(BusinessError, match="names no registration list"):
        run(process_crtc(crtc_ctx(make_ctx, services=["voip"])))
    assert portals.ledger(CRTC) == []



def test_registered_once_the_public_registration_list_shows_it(run, portals, make_ctx):
    """Staff's letter comes after an hour; the public registration list shows the company
    20 hours later ("within 24 hours of the date the confirmation letter is sent"): the job
    stores the letter at once, then waits on the list (checked on its own rule, no second
    submission, the letter not fetched again) and ends registered with the listing date."""
    clock = FrozenClock(datetime(2026, 3, 2, 15, 0, tzinfo=UTC))
    set_clock(clock)
    portals.control(CRTC, decide_after_seconds=3600, list_after_seconds=20 * 3600)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(WaitOnPortal, match="CRTC staff to process"):
        run(process_crtc(ctx))
    clock.advance(hours=1, seconds=1)
    lettered = ctx.retry()
    with pytest.raises(WaitOnPortal, match="public registration list to show") as info:
        run(process_crtc(lettered))
    [entry] = portals.ledger(CRTC)
    letter = f"{entry['confirmation']}-confirmation-letter.pdf"
    assert [d[0] for d in lettered.documents.by_job[ctx.job_id]] == [letter]
    conf = record(lettered.checkpoints, "crtc_registration").confirmation
    assert conf["letter_document"] == letter and conf["confirmation"] == entry["confirmation"]
    assert info.value.when == clock.instant + timedelta(hours=2)   # the list's interval
    assert lettered.checkpoints["waiting"]["expected_by"] == (
        clock.instant + timedelta(hours=26)).isoformat()
    clock.advance(hours=10)
    still = lettered.retry()
    with pytest.raises(WaitOnPortal, match="public registration list"):
        run(process_crtc(still))
    assert still.checkpoints["waiting"]["checks"] == 2 and still.told == []
    clock.advance(hours=10)
    done = still.retry()
    result = run(process_crtc(done))
    assert result == {"confirmation": entry["confirmation"], "documents": [letter],
                      "reconciled": True, "listed_on": "2026-03-03"}
    assert done.checkpoints["waiting"] is None and len(portals.ledger(CRTC)) == 1
    assert len(done.documents.by_job[ctx.job_id]) == 1   # the letter once


def test_not_listed_past_a_day_after_the_letter_escalates_once_and_keeps_checking(
        run, portals, make_ctx):
    clock = FrozenClock(datetime(2026, 3, 2, 15, 0, tzinfo=UTC))
    set_clock(clock)
    portals.control(CRTC, list_after_seconds=40 * 3600)
    ctx = crtc_ctx(make_ctx)
    with pytest.raises(WaitOnPortal, match="public registration list"):
        run(process_crtc(ctx))
    attempt = ctx
    for hours in (27, 2):
        clock.advance(hours=hours)
        attempt = attempt.retry()
        with pytest.raises(WaitOnPortal):
            run(process_crtc(attempt))
    assert [kind for kind, _ in attempt.told] == ["waiting"]
    assert "past the expected time" in attempt.told[0][1]
    clock.advance(hours=12)
    assert run(process_crtc(attempt.retry()))["listed_on"] == "2026-03-04"
    assert len(portals.ledger(CRTC)) == 1
