"""file_entity (DE) against the Delaware online filing stand-in, in real Chromium."""

from __future__ import annotations

import base64
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flowkit import assert_no_secret, inflate_all

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError, UncertainOutcome
from portalq.jobs.waiting import WaitOnPortal
from portalq.portals.delaware.flow import file_entity_de
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser

PORTAL = "delaware_icis"


@pytest.fixture
def de_ctx(make_ctx, de_payload):
    def build(**overrides: Any):
        return make_ctx("file_entity", de_payload(**overrides))
    return build


def fails(run, ctx, exc_type):
    with pytest.raises(exc_type) as info:
        run(file_entity_de(ctx))
    return info.value


def uploaded(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["document"]["pdf"])


def test_llc_formation_end_to_end(run, portals, de_ctx):
    """eCorp2's e-filing: the form's choices, the certificate built from the payload and
    uploaded as a PDF, the confirmation dialog, the payment, the Service Request Number;
    the request status then shows it filed with its file number and stamped document."""
    ctx = de_ctx()
    result = run(file_entity_de(ctx))
    [entry] = portals.ledger(PORTAL)
    assert result["file_number"] == entry["file_number"]
    assert result["service_request"] == entry["service_request"]
    assert (entry["priority"], entry["request_type"], entry["return_method"]) == (
        "NormalProcessing", "documentFilingRequest", "RegularMail")
    assert (entry["corporation_name"], entry["document_type"]) == (
        "Blue Heron Ventures LLC", "Certificate of Formation")
    pdf = uploaded(entry)
    assert pdf.startswith(b"%PDF-") and entry["document"]["name"] == "Certificate_of_Formation.pdf"
    assert b"CERTIFICATE OF FORMATION" in pdf and b"Blue Heron Ventures LLC" in pdf
    assert b"Corporation Service Company" in pdf and b"Authorized Person: /s/ Ada Filer" in pdf
    assert entry["payment"] == {**entry["payment"], "type": "CREDITCARD", "card": "1111",
                                "amount": "$110.00"}
    assert result["documents"] == [f"Certificate_{result['file_number']}.pdf"]
    [(name, content_type, stamped)] = ctx.documents.by_job[ctx.job_id]
    assert content_type == "application/pdf" and stamped.startswith(b"%PDF-")
    text = inflate_all(stamped)
    assert b"CERTIFICATE OF FORMATION" in text and b"Blue Heron Ventures LLC" in text
    assert record(ctx.checkpoints, "formation").confirmation == {
        "service_request": entry["service_request"], "file_number": entry["file_number"],
        "certificate_url": record(ctx.checkpoints, "formation").confirmation[
            "certificate_url"]}
    assert state(ctx.checkpoints, "formation") == "confirmed"
    # decided in the run that submitted it (no check saw it pending): the ETA still learns
    # how long the registry took -- between the submission and the read that saw it filed
    decided = ctx.checkpoints["decided"]["formation"]
    assert decided["portal"] == PORTAL and decided["last_check"] == decided["since"]
    assert decided["since"] <= decided["seen"]
    assert [p.name for p in sorted(ctx.artifacts_dir.glob("*.png"))] == [
        "01-request.png", "02-confirm.png", "03-submitted.png", "04-status.png"]
    assert assert_no_secret(ctx.artifacts_dir, "4111111111111111")   # the card, masked
    assert not (ctx.artifacts_dir / "trace.zip").exists()  # retain-on-failure, succeeded


def test_corporation_certificate_names_its_stock_and_incorporator(run, portals, de_ctx):
    ctx = de_ctx(entity_type="CORPORATION", legal_name="Heron Robotics, Inc.",
                 incorporators=[{"first_name": "Ida", "last_name": "Incorporator"}],
                 share_classes=[{"name": "Common", "max_shares": 1500}])
    result = run(file_entity_de(ctx))
    [entry] = portals.ledger(PORTAL)
    assert entry["document_type"] == "Certificate of Incorporation"
    pdf = uploaded(entry)
    assert b"CERTIFICATE OF INCORPORATION" in pdf and b"Common: 1500" in pdf
    assert b"Incorporator: /s/ Ida Incorporator" in pdf
    assert result["file_number"] == entry["file_number"]


def test_name_without_designator_is_a_business_error_before_anything_is_filed(
        run, portals, de_ctx):
    exc = fails(run, de_ctx(legal_name="Blue Heron Ventures"), BusinessError)
    assert "must end with a designator" in str(exc)
    assert portals.ledger(PORTAL) == []


def test_no_payment_method_is_a_business_error_nothing_filed(
        run, portals, de_ctx, monkeypatch):
    monkeypatch.delenv("PORTALQ_ACCOUNT_DELAWARE_ICIS_PAYMENT_METHOD")
    ctx = de_ctx()
    assert "no payment method configured" in str(fails(run, ctx, BusinessError))
    assert portals.ledger(PORTAL) == [] and state(ctx.checkpoints, "formation") is None


def test_closed_and_maintenance(run, portals, de_ctx):
    portals.control(PORTAL, hours="closed")
    assert not fails(run, de_ctx(), PortalClosed).outage
    portals.control(PORTAL, hours="always", maintenance=True)
    assert fails(run, de_ctx(), PortalClosed).outage


def test_dropped_answer_is_reconciled_by_lookup(run, portals, de_ctx):
    portals.control(PORTAL, drop_after_submit=True)
    ctx = de_ctx()
    assert "reconciles" in str(fails(run, ctx, RetryableError))
    assert state(ctx.checkpoints, "formation") == "submitting"
    assert not record(ctx.checkpoints, "formation").confirmation
    [entry] = portals.ledger(PORTAL)
    portals.control(PORTAL, drop_after_submit=False)
    retry = ctx.retry()
    result = run(file_entity_de(retry))
    assert result["file_number"] == entry["file_number"]
    assert retry.checkpoints["reconciled"] == "found"
    assert retry.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")
    assert len(portals.ledger(PORTAL)) == 1  # filed exactly once


def test_unrecognised_payment_answer_then_a_retry_pays_once(run, portals, de_ctx):
    """The portal took the filing and its payment, then answered in words the flow does
    not know (here "session has timed out", which no source shows as a refusal): the
    outcome is unknown, never a refusal, so the retry does not file and pay again."""
    portals.control(PORTAL, answer_after_submit="Your session has timed out. Please sign "
                                                "in again.")
    ctx = de_ctx()
    fails(run, ctx, RetryableError)
    portals.control(PORTAL, answer_after_submit=None)
    retry = ctx.retry()
    with suppress(RetryableError, WaitOnPortal, UncertainOutcome):
        run(file_entity_de(retry))
    assert [e["payment"]["amount"] for e in portals.ledger(PORTAL)] == ["$110.00"]
    assert state(ctx.checkpoints, "formation") == "submitting"   # in doubt, never refused


def test_system_error_at_submit_waits_then_goes_to_a_person_never_files_again(
        run, portals, de_ctx):
    # a 500 after the click: the outcome is unknown; "not found" is not conclusive for
    # Delaware (portals/lookups.py), so the job waits, then a person -- never a 2nd filing
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(PORTAL, error_code="E503", error_times=1)
    ctx = de_ctx()
    assert "Error E503" in str(fails(run, ctx, RetryableError))
    assert state(ctx.checkpoints, "formation") == "submitting" and portals.ledger(PORTAL) == []
    retry = ctx.retry()
    wait = fails(run, retry, WaitOnPortal)
    assert retry.checkpoints["reconciled"] == "not_found" and portals.ledger(PORTAL) == []
    assert wait.when == clock.instant + timedelta(minutes=15)   # the portal's interval
    clock.advance(hours=49)                                      # past the 48 h window
    last = retry.retry()
    exc = fails(run, last, UncertainOutcome)
    assert "was lost" in str(exc) and "never conclusive" in str(exc)
    assert record(last.checkpoints, "formation").reference in str(exc)
    assert "2 checks" in str(exc)
    assert portals.ledger(PORTAL) == [] and state(last.checkpoints, "formation") == "submitting"


def test_dropped_answer_while_queued_waits_and_files_once(run, portals, de_ctx):
    """The answer is lost right after the click while the registry keeps the request queued
    for an hour: the request status lists it pending; the job records its Service Request
    Number and waits (no resubmission), and ends filed with the registry's number once staff
    file it: one filing, one payment."""
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(PORTAL, drop_after_submit=True, decide_after_seconds=3600)
    ctx = de_ctx()
    fails(run, ctx, RetryableError)
    portals.control(PORTAL, drop_after_submit=False)
    attempt = ctx
    for minutes, checks in ((1, 1), (20, 2), (20, 3)):
        clock.advance(minutes=minutes)
        attempt = attempt.retry()
        wait = fails(run, attempt, WaitOnPortal)
        mark = attempt.checkpoints["waiting"]
        assert mark["portal"] == PORTAL and mark["checks"] == checks
        assert wait.when == clock.instant + timedelta(minutes=15 * 2 ** (checks - 1))
        assert str(wait).startswith("waiting on delaware_icis since ")
        assert len(portals.ledger(PORTAL)) == 1
        assert attempt.checkpoints["reconciled"] == "found"
        assert record(attempt.checkpoints, "formation").confirmation == {
            "service_request": portals.ledger(PORTAL)[0]["service_request"]}
    clock.advance(minutes=30)                                   # staff filed it
    done = attempt.retry()
    result = run(file_entity_de(done))
    [entry] = portals.ledger(PORTAL)
    assert result["file_number"] == entry["file_number"]
    assert entry["payment"]["amount"] == "$110.00"              # one filing, one payment
    assert done.checkpoints["waiting"] is None
    assert record(done.checkpoints, "formation").confirmation["file_number"] == \
        entry["file_number"]
    assert done.documents.by_job[ctx.job_id][0][2].startswith(b"%PDF-")


def test_queued_request_records_its_service_request_number_then_waits(run, portals, de_ctx):
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    portals.control(PORTAL, decide_after_seconds=7200)
    ctx = de_ctx()
    wait = fails(run, ctx, WaitOnPortal)
    [entry] = portals.ledger(PORTAL)
    assert record(ctx.checkpoints, "formation").confirmation == {
        "service_request": entry["service_request"]}
    assert f"service request {entry['service_request']}" in str(wait)
    clock.advance(hours=1)
    again = ctx.retry()
    fails(run, again, WaitOnPortal)                      # a check: read-only
    clock.advance(hours=1, seconds=1)
    last = again.retry()
    assert run(file_entity_de(last))["file_number"] == entry["file_number"]
    assert len(portals.ledger(PORTAL)) == 1
    # how long staff took is kept for the ETA: submitted, the last check that saw it
    # pending (an hour later), seen filed -- the decision lies between the last two
    submitted = clock.instant - timedelta(hours=2, seconds=1)
    assert last.checkpoints["waiting"] is None
    assert last.checkpoints["decided"] == {"formation": {
        "portal": PORTAL, "since": submitted.isoformat(),
        "last_check": (submitted + timedelta(hours=1)).isoformat(),
        "seen": clock.instant.isoformat()}}


def test_changed_selector_dialog_and_session_expiry(run, portals, de_ctx):
    portals.control(PORTAL, changed_selector=True)
    assert str(fails(run, de_ctx(), RetryableError)) == \
        "Continue control not found: portal changed?"
    portals.control(PORTAL, changed_selector=False, expire_session=True)
    assert "timed out" in str(fails(run, de_ctx(), RetryableError))
    portals.control(PORTAL, dialog=True)
    assert run(file_entity_de(de_ctx()))["file_number"]
    assert len(portals.ledger(PORTAL)) == 1


def test_retry_after_file_number_only_fetches_the_certificate(run, portals, de_ctx):
    ctx = de_ctx()
    number = run(file_entity_de(ctx))["file_number"]
    retry = ctx.retry()
    retry.documents.by_job.clear()
    portals.control(PORTAL, hours="closed")
    assert run(file_entity_de(retry))["file_number"] == number
    assert retry.documents.by_job[ctx.job_id][0][0] == f"Certificate_{number}.pdf"
    assert len(portals.ledger(PORTAL)) == 1


def test_queued_request_rejected_by_staff_is_a_business_error_in_their_words(
        run, portals, de_ctx):
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    reason = "The certificate must be signed by an authorized person."
    portals.control(PORTAL, decide_after_seconds=3600, staff_outcome=f"reject: {reason}")
    ctx = de_ctx()
    fails(run, ctx, WaitOnPortal)
    [entry] = portals.ledger(PORTAL)
    clock.advance(hours=1, seconds=1)
    retry = ctx.retry()
    exc = fails(run, retry, BusinessError)
    assert str(exc) == f"Delaware rejected service request {entry['service_request']}: {reason}"
    assert state(retry.checkpoints, "formation") == "refused"
    assert retry.checkpoints["waiting"] is None and len(portals.ledger(PORTAL)) == 1
    # a refusal is a decision too: the ETA learns from it (the job fails, the record stays)
    assert retry.checkpoints["decided"]["formation"]["seen"] == clock.instant.isoformat()


def test_the_business_supplied_certificate_is_uploaded_as_given(run, portals, de_ctx):
    """``--document``: the signed PDF the business supplied is what eCorp2 receives, not one
    built from the payload; the job's outputs stay the filed documents."""
    ctx = de_ctx()
    signed = b"%PDF-1.7\n% signed by the organizer, with a wet-ink signature scan\n%%EOF\n"
    ctx.documents.put(ctx.job_id, "supplied_signed.pdf", "application/pdf", signed)
    result = run(file_entity_de(ctx))
    [entry] = portals.ledger(PORTAL)
    assert uploaded(entry) == signed and entry["document"]["name"] == "signed.pdf"
    assert result["documents"] == [f"Certificate_{entry['file_number']}.pdf"]


def _rejected_then_fixed(run, portals, de_ctx, clock, reason):
    """A request staff rejected within minutes (a priority-like delay); the person fixed
    the payload and retries the job: returns (the retry's context, the rejected entry)."""
    portals.control(PORTAL, decide_after_seconds=120, staff_outcome=f"reject: {reason}")
    ctx = de_ctx()
    fails(run, ctx, WaitOnPortal)
    clock.advance(minutes=2, seconds=1)
    checked = ctx.retry()
    fails(run, checked, BusinessError)
    [rejected] = portals.ledger(PORTAL)
    portals.control(PORTAL, decide_after_seconds=3600, staff_outcome="approve")
    fixed = checked.retry()
    fixed.payload = {**fixed.payload, "registered_agent": "The Corporation Trust Company"}
    return fixed, rejected


def test_retry_after_rejection_files_a_new_request_under_a_new_key(run, portals, de_ctx):
    """Staff rejected the request; the person fixed the payload and retried: the retry files
    a NEW service request under a new submission key (the rejected one is never looked up
    again as if it were this one), waits on it, and ends filed with its number."""
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    fixed, rejected = _rejected_then_fixed(run, portals, de_ctx, clock, "Signature missing.")
    old_key = record(fixed.checkpoints, "formation").reference
    clock.advance(minutes=1)
    wait = fails(run, fixed, WaitOnPortal)
    first, second = portals.ledger(PORTAL)
    assert first == rejected and second["service_request"] != rejected["service_request"]
    assert f"service request {second['service_request']}" in str(wait)
    new = record(fixed.checkpoints, "formation")
    assert new.reference != old_key
    assert new.confirmation == {"service_request": second["service_request"]}
    clock.advance(hours=1, seconds=1)
    result = run(file_entity_de(fixed.retry()))
    assert result["service_request"] == second["service_request"]
    assert result["file_number"] == second["file_number"] and len(portals.ledger(PORTAL)) == 2


def test_lost_answer_after_a_rejection_is_not_mistaken_for_the_rejected_request(
        run, portals, de_ctx):
    """The retry after a rejection loses its answer: the request status still lists the
    rejected request for the same corporation and document, submitted minutes earlier. The
    lookup must find the NEW request (pending, then filed) -- not report the old rejection
    again, and never file a third time."""
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    fixed, rejected = _rejected_then_fixed(run, portals, de_ctx, clock, "Signature missing.")
    portals.control(PORTAL, drop_after_submit=True)
    fails(run, fixed, RetryableError)
    assert state(fixed.checkpoints, "formation") == "submitting"
    portals.control(PORTAL, drop_after_submit=False)
    clock.advance(minutes=1)
    check = fixed.retry()
    fails(run, check, WaitOnPortal)
    first, second = portals.ledger(PORTAL)
    assert check.checkpoints["reconciled"] == "found"
    assert record(check.checkpoints, "formation").confirmation == {
        "service_request": second["service_request"]}
    clock.advance(hours=1, seconds=1)
    result = run(file_entity_de(check.retry()))
    assert result["service_request"] == second["service_request"] != rejected["service_request"]
    assert len(portals.ledger(PORTAL)) == 2
