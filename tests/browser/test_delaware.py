"""file_entity (DE) against the Delaware online filing stand-in, in real Chromium."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flowkit import inflate_all

from portalq.jobs.errors import BusinessError, PortalClosed, RetryableError
from portalq.portals.flows.delaware import file_entity_de
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


def test_llc_formation_end_to_end(run, portals, de_ctx):
    ctx = de_ctx()
    result = run(file_entity_de(ctx))
    assert re.fullmatch(r"\d{7}", result["file_number"])
    assert result["documents"] == [f"Certificate_{result['file_number']}.pdf"]
    [(name, content_type, pdf)] = ctx.documents.by_job[ctx.job_id]
    assert content_type == "application/pdf" and pdf.startswith(b"%PDF-")
    text = inflate_all(pdf)
    assert b"CERTIFICATE OF FORMATION" in text and b"Blue Heron Ventures LLC" in text
    [entry] = portals.ledger(PORTAL)
    assert entry["file_number"] == result["file_number"]
    assert entry["client_ref"] == record(ctx.checkpoints, "formation").reference == f"PQ-{ctx.job_id}"
    assert state(ctx.checkpoints, "formation") == "confirmed"
    assert [p.name for p in sorted(ctx.artifacts_dir.glob("*.png"))] == [
        "01-home.png", "02-entity.png", "03-details.png", "04-review.png", "05-filed.png"]
    assert not (ctx.artifacts_dir / "trace.zip").exists()  # retain-on-failure, succeeded


def test_corporation_with_one_share_class(run, portals, de_ctx):
    ctx = de_ctx(entity_type="CORPORATION", legal_name="Heron Robotics, Inc.",
                 incorporators=[{"first_name": "Ida", "last_name": "Incorporator"}],
                 share_classes=[{"name": "Common", "max_shares": 1500}])
    result = run(file_entity_de(ctx))
    text = inflate_all(ctx.documents.by_job[ctx.job_id][0][2])
    assert b"CERTIFICATE OF INCORPORATION" in text and b"Common: 1500" in text
    assert portals.ledger(PORTAL)[0]["authorized_person"] == "Ida Incorporator"
    assert result["file_number"]


def test_not_eligible_for_online_filing_is_a_business_error(run, portals, de_ctx):
    ctx = de_ctx(entity_type="CORPORATION", legal_name="Heron Robotics, Inc.",
                 share_classes=[{"name": "Common", "max_shares": 1000},
                                {"name": "Preferred", "max_shares": 100}])
    exc = fails(run, ctx, BusinessError)
    assert "not eligible for online filing" in str(exc) and "more than one class" in str(exc)
    assert portals.ledger(PORTAL) == [] and state(ctx.checkpoints, "formation") is None
    assert (ctx.artifacts_dir / "trace.zip").exists()  # kept: the attempt failed


def test_name_without_designator_is_a_business_error(run, portals, de_ctx):
    exc = fails(run, de_ctx(legal_name="Blue Heron Ventures"), BusinessError)
    assert "must end with a designator" in str(exc)


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


def test_system_error_at_submit_then_lookup_finds_nothing_and_files(run, portals, de_ctx):
    portals.control(PORTAL, error_code="E503", error_times=1)
    ctx = de_ctx()
    assert "HTTP 500" in str(fails(run, ctx, RetryableError))
    assert state(ctx.checkpoints, "formation") == "submitting" and portals.ledger(PORTAL) == []
    retry = ctx.retry()
    result = run(file_entity_de(retry))
    assert retry.checkpoints["reconciled"] == "not_found"
    assert [e["file_number"] for e in portals.ledger(PORTAL)] == [result["file_number"]]


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
