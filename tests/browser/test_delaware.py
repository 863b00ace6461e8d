"""file_entity (DE) against the Delaware online filing stand-in, in real Chromium.

No page of the real portal is known to show a request's later status (issue 53): a
submitted request waits, holding no browser, until its expected decision time, then a
person is asked what to check and where; an answer that is not the Service Request Number
goes to a person at once. Never a second filing or payment."""

from __future__ import annotations

import base64
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flowkit import assert_no_secret

from portalq.jobs.clock import FrozenClock, set_clock
from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError, UncertainOutcome
from portalq.jobs.waiting import WaitOnPortal
from portalq.portals.delaware.flow import ENTITY_SEARCH, file_entity_de
from tests.checkpoints import record, state

pytestmark = pytest.mark.browser

PORTAL = "delaware_icis"
EXPECTED = timedelta(hours=48)   # portals/lookups.py: the decision expected within 48 h


@pytest.fixture
def de_ctx(make_ctx, de_payload):
    def build(**overrides: Any):
        return make_ctx("file_entity", de_payload(**overrides))
    return build


@pytest.fixture
def frozen():
    clock = FrozenClock(datetime.now(UTC))
    set_clock(clock)
    return clock


def fails(run, ctx, exc_type):
    with pytest.raises(exc_type) as info:
        run(file_entity_de(ctx))
    return info.value


def uploaded(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["document"]["pdf"])


def asks_what_to_check(exc: BaseException, ctx, *words: str) -> None:
    """A person is told where to look (the account on eCorp2, the entity search) and what
    to say after (``--confirmed-filed`` / ``--not-filed``)."""
    text = str(exc)
    assert f"sign in to eCorp2 ({ctx.portal_urls[PORTAL].rstrip('/')}/)" in text
    assert f"portalq jobs retry {ctx.job_id} --confirmed-filed" in text
    for word in words:
        assert word in text


def test_llc_formation_submits_then_a_person_checks_at_the_expected_time(
        run, portals, de_ctx, frozen):
    """eCorp2's e-filing: the form's choices, the certificate built from the payload and
    uploaded as a PDF, the confirmation dialog, the payment, the Service Request Number.
    No known page shows what staff do next: the job waits, in one wait and with no browser,
    until the expected decision time, and then a person is asked what to check and where."""
    ctx = de_ctx()
    wait = fails(run, ctx, WaitOnPortal)
    [entry] = portals.ledger(PORTAL)
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
    assert record(ctx.checkpoints, "formation").confirmation == {
        "service_request": entry["service_request"], "entity_name": "Blue Heron Ventures LLC"}
    assert wait.when == frozen.instant + EXPECTED     # one wait, to the expected time
    assert f"service request {entry['service_request']}" in str(wait)
    assert [p.name for p in sorted(ctx.artifacts_dir.glob("*.png"))] == [
        "01-request.png", "02-confirm.png", "03-submitted.png"]
    assert assert_no_secret(ctx.artifacts_dir, "4111111111111111")   # the card, masked
    # a run before the time (a rescued job, an admin's retry) waits again, opening nothing:
    # with the portal closed, a flow that opened it would be deferred as closed
    portals.control(PORTAL, hours="closed")
    frozen.advance(hours=47)
    early = ctx.retry()
    assert fails(run, early, WaitOnPortal).when == frozen.instant + timedelta(hours=1)
    frozen.advance(hours=1)
    due = early.retry()
    person = fails(run, due, UncertainOutcome)
    asks_what_to_check(person, due, f"service request {entry['service_request']}",
                       "Blue Heron Ventures LLC", ENTITY_SEARCH, "no page known to exist")
    assert len(portals.ledger(PORTAL)) == 1 and ctx.told == []


def test_corporation_certificate_names_its_stock_and_incorporator(run, portals, de_ctx):
    ctx = de_ctx(entity_type="CORPORATION", legal_name="Heron Robotics, Inc.",
                 incorporators=[{"first_name": "Ida", "last_name": "Incorporator"}],
                 share_classes=[{"name": "Common", "max_shares": 1500}])
    fails(run, ctx, WaitOnPortal)
    [entry] = portals.ledger(PORTAL)
    assert entry["document_type"] == "Certificate of Incorporation"
    pdf = uploaded(entry)
    assert b"CERTIFICATE OF INCORPORATION" in pdf and b"Common: 1500" in pdf
    assert b"Incorporator: /s/ Ida Incorporator" in pdf


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


def test_unrecognised_payment_answer_then_a_retry_pays_once(run, portals, de_ctx):
    """The portal took the filing and its payment, then answered in words the flow does
    not know (here "session has timed out", which no source shows as a refusal): the
    outcome is unknown, never a refusal, so the retry does not file and pay again."""
    portals.control(PORTAL, answer_after_submit="Your session has timed out. Please sign "
                                                "in again.")
    ctx = de_ctx()
    with suppress(RetryableError, UncertainOutcome):
        run(file_entity_de(ctx))
    portals.control(PORTAL, answer_after_submit=None)
    retry = ctx.retry()
    with suppress(RetryableError, WaitOnPortal, UncertainOutcome):
        run(file_entity_de(retry))
    assert [e["payment"]["amount"] for e in portals.ledger(PORTAL)] == ["$110.00"]
    assert state(ctx.checkpoints, "formation") == "submitting"   # in doubt, never refused


def test_a_lost_answer_goes_to_a_person_at_once_and_is_never_filed_again(
        run, portals, de_ctx, frozen):
    """The connection breaks after the portal took the request and its payment: no page can
    show whether it was taken, so a person is asked at once, told what to look for; a
    retry asks again and files nothing (1 filing, 1 payment)."""
    portals.control(PORTAL, drop_after_submit=True)
    ctx = de_ctx()
    lost = fails(run, ctx, UncertainOutcome)
    asks_what_to_check(lost, ctx, "Blue Heron Ventures LLC", "may have been taken and paid",
                       "--not-filed", f"{frozen.instant:%Y-%m-%d %H:%M} UTC")
    assert state(ctx.checkpoints, "formation") == "submitting"
    portals.control(PORTAL, drop_after_submit=False)
    again = ctx.retry()
    asks_what_to_check(fails(run, again, UncertainOutcome), again, "earlier attempt")
    assert len(portals.ledger(PORTAL)) == 1


def test_any_alert_after_the_payment_goes_to_a_person_never_a_refusal(
        run, portals, de_ctx):
    """A system error after the click (here the portal did not act, but the flow cannot
    know): the person is asked with the page's words; nothing is filed by a retry."""
    portals.control(PORTAL, error_code="E503", error_times=1)
    ctx = de_ctx()
    exc = fails(run, ctx, UncertainOutcome)
    assert "Error E503" in str(exc) and portals.ledger(PORTAL) == []
    assert state(ctx.checkpoints, "formation") == "submitting"
    fails(run, ctx.retry(), UncertainOutcome)
    assert portals.ledger(PORTAL) == []


def test_changed_selector_dialog_and_session_expiry(run, portals, de_ctx):
    portals.control(PORTAL, changed_selector=True)
    assert str(fails(run, de_ctx(), RetryableError)) == \
        "Continue control not found: portal changed?"
    # the session ends at the payment: eCorp2's words for it are unsourced, so after the
    # click they are not read as "not received" -- a person checks (here nothing was taken)
    portals.control(PORTAL, changed_selector=False, expire_session=True)
    assert "session has timed out" in str(fails(run, de_ctx(), UncertainOutcome))
    assert portals.ledger(PORTAL) == []
    portals.control(PORTAL, dialog=True)
    fails(run, de_ctx(), WaitOnPortal)
    assert len(portals.ledger(PORTAL)) == 1


def test_the_business_supplied_certificate_is_uploaded_as_given(run, portals, de_ctx):
    """``--document``: the signed PDF the business supplied is what eCorp2 receives, not one
    built from the payload."""
    ctx = de_ctx()
    signed = b"%PDF-1.7\n% signed by the organizer, with a wet-ink signature scan\n%%EOF\n"
    ctx.documents.put(ctx.job_id, "supplied_signed.pdf", "application/pdf", signed)
    fails(run, ctx, WaitOnPortal)
    [entry] = portals.ledger(PORTAL)
    assert uploaded(entry) == signed and entry["document"]["name"] == "signed.pdf"
