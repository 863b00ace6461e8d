"""Orders as pipelines (issue 41) run by the real service (`portalq run`) against the
stand-ins: a Delaware LLC order files with Delaware (whose staff decide the request a little
later), applies for the EIN with the filed entity's data, and mails the certificate and the
CP 575; an escalated filing holds the EIN step until a person fixes it; cancelling mid-way
cancels only what has not run."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from portalq.jobs import queue
from portalq.jobs.business import order_runs
from tests.conftest import run_cli
from tests.mailbox import Mailbox
from tests.order_inputs import DELAWARE_LLC
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = pytest.mark.browser
DE = "delaware_icis"
CUSTOMER = DELAWARE_LLC["contact_email"]


def _service(db, tmp_path, standin_server, mailbox):
    # the registry's decision is checked every second (PORTALQ_PORTAL_CHECK_SECONDS)
    return Service(db, tmp_path, "orders", PORTALQ_STANDIN_URL=standin_server.base_url,
                   PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                   PORTALQ_RETRY_BASE_SECONDS=0.2, PORTALQ_WORKERS=3,
                   PORTALQ_PORTAL_CHECK_SECONDS=1)


def _sweep(dsn):
    async def go():
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await order_runs.arelease_held(c)
    return asyncio.run(go())


def _steps(order_id):
    return {s["step"]: s for s in order_runs.order_steps(order_id)}


def _status(order_id, step):
    return _steps(order_id)[step]["status"]


def test_a_delaware_llc_order_end_to_end(db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    portals.control(DE, decide_after_seconds=2)   # staff decide the request 2 s later
    mailbox = Mailbox().start()
    created = order_runs.enqueue_order("delaware_llc", "ORD-1001", DELAWARE_LLC)
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        wait_until(lambda: _status("ORD-1001", "deliver") in ("completed", "failed"), 180,
                   "the order's delivery")
        [mail] = [m for m in mailbox.wait_for(1, 10) if m["To"] == CUSTOMER]
    finally:
        svc.stop()
        mailbox.stop()
    jobs = {k: queue.get_job(j) for k, j in created.jobs.items()}
    assert {k: j["status"] for k, j in jobs.items()} == dict.fromkeys(jobs, "completed"), {
        k: j["last_error"] for k, j in jobs.items()}
    filed, ein = jobs["file_entity"], jobs["obtain_ein"]
    assert "service_request" in filed["checkpoint"]["submissions"]["formation"][
        "confirmation"]                                # it waited for Delaware's staff
    # the EIN step received the filed entity's data, and started only after the filing
    assert ein["payload"]["legal_name"] == filed["result"]["entity_name"]
    assert ein["payload"]["state"] == "DE" and ein["started_at"] > filed["finished_at"]
    # the firm applies as the third-party designee: the IRS mails the CP 575 to the applicant
    # (no digital letter for a designee; tests/facts/irs-ein-assignment.txt §5), so the
    # delivery carries the certificate alone
    assert ein["result"]["documents"] == []
    assert jobs["deliver"]["payload"]["documents"] == [{"source_job_id": filed["id"]}]
    attached = sorted(p.get_filename() for p in mail.walk() if p.get_filename())
    assert len(attached) == 1 and not any("CP575" in n.upper().replace("_", "")
                                          for n in attached), attached
    assert len(portals.ledger(DE)) == 1 and len(portals.ledger("irs_ein")) == 1
    with psycopg.connect(dsn) as c:   # nothing waits for the order's input: erased
        assert c.execute("SELECT input_data FROM portalq.orders").fetchone()[0] is None


@pytest.mark.e2e
def test_an_escalated_filing_holds_the_ein_step_until_a_person_fixes_it(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    # the order's name lacks the ending Delaware requires: the filing fails for a person
    created = order_runs.enqueue_order("delaware_llc", "ORD-1002",
                                       {**DELAWARE_LLC, "legal_name": "Widgets"})
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        wait_until(lambda: _status("ORD-1002", "file_entity") == "failed", 120,
                   "the filing's failure")
        [escalation] = [m for m in mailbox.wait_for(1, 30) if m["To"] == "ops@example.com"]
        assert "business: file_entity" in escalation["Subject"]
        assert _sweep(dsn) == []   # the leader's sweep does not release it either
        # held: the EIN step spends nothing while the filing waits for a person
        held = queue.get_job(created.jobs["obtain_ein"])
        assert held["status"] == "deferred" and held["run_at"] == order_runs.HELD_UNTIL
        assert held["attempts"] == 0 and portals.ledger("irs_ein") == []
        out = run_cli("jobs", "retry", str(created.jobs["file_entity"]), "--payload-patch",
                      '{"legal_name": "Widgets LLC"}', "--note", "the name needs its ending")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _status("ORD-1002", "deliver") in ("completed", "failed"), 180,
                   "the rest of the order after the person's fix")
    finally:
        svc.stop()
        mailbox.stop()
    ein = queue.get_job(created.jobs["obtain_ein"])
    assert ein["status"] == "completed", ein["last_error"]
    # the EIN application carries the name as filed, not as the order typed it
    assert ein["payload"]["legal_name"] == "Widgets LLC"
    assert queue.get_job(created.jobs["deliver"])["status"] == "completed"
    assert len(portals.ledger(DE)) == 1 and len(portals.ledger("irs_ein")) == 1


@pytest.mark.e2e
def test_cancelling_mid_way_cancels_only_what_has_not_run(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    portals.control(DE, decide_after_seconds=3600)   # filed, staff decide in an hour
    mailbox = Mailbox().start()
    created = order_runs.enqueue_order("delaware_llc", "ORD-1003", DELAWARE_LLC)
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        wait_until(lambda: len(portals.ledger(DE)) == 1
                   and _status("ORD-1003", "file_entity") == "deferred", 120,
                   "the filing waiting for Delaware's staff")
        out = run_cli("orders", "cancel", "ORD-1003", "--reason", "client withdrew")
        assert out.returncode == 0, out.stderr
    finally:
        svc.stop()
        mailbox.stop()
    steps = _steps("ORD-1003")
    # the filing reached Delaware: left to finish; what had not run is cancelled
    assert {k: s["status"] for k, s in steps.items()} == {
        "file_entity": "deferred", "obtain_ein": "cancelled", "deliver": "cancelled"}
    assert out.stdout.strip() == (f"order ORD-1003 cancelled: jobs {created.jobs['obtain_ein']}"
                                  f", {created.jobs['deliver']} cancelled")
    assert portals.ledger("irs_ein") == []


@pytest.mark.e2e
def test_a_bc_company_order_incorporates_with_its_approved_name_request(
        db, dsn, tmp_path, standin_server, portals):
    from tests.browser import bckit

    open_all_hours(dsn)
    mailbox = Mailbox().start()
    order = {"names": ["Cedar Harbour Consulting Ltd."],
             "applicant": bckit.NAME_SEARCH["applicant"],
             **{k: bckit.FILE_ENTITY[k] for k in (
                 "completing_party", "incorporators", "directors", "share_classes",
                 "registered_office", "contact_email", "contact_phone")}}
    created = order_runs.enqueue_order("bc_company", "ORD-2001", order)
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        wait_until(lambda: _status("ORD-2001", "deliver") in ("completed", "failed"), 240,
                   "the order's delivery")
    finally:
        svc.stop()
        mailbox.stop()
    jobs = {k: queue.get_job(j) for k, j in created.jobs.items()}
    assert {k: j["status"] for k, j in jobs.items()} == dict.fromkeys(jobs, "completed"), {
        k: j["last_error"] for k, j in jobs.items()}
    nr = jobs["name_search"]["result"]
    # the filing used the name request the search obtained
    assert jobs["file_entity"]["payload"]["nr_number"] == nr["nr_number"]
    assert jobs["file_entity"]["result"]["nr_number"] == nr["nr_number"]
    assert len(bckit.entries(portals, "bc_corporate_online", "incorporation")) == 1
