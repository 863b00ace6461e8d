"""Orders as pipelines (issue 41) run by the real service (`portalq run`) against the
stand-ins: a Delaware LLC order files with Delaware (no page known to exist shows what its
staff decide, so a person confirms the filing at its expected time, issue 53), applies for
the EIN, and mails the CP 575; an escalated filing holds the EIN step until a person fixes
it; cancelling mid-way cancels only what has not run."""

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


def _service(db, tmp_path, standin_server, mailbox, check: int | None = 1):
    # the registry's decision is checked every second (PORTALQ_PORTAL_CHECK_SECONDS): for
    # Delaware, whose decision no known page shows, the person is asked after a second
    env = {"PORTALQ_PORTAL_CHECK_SECONDS": check} if check is not None else {}
    return Service(db, tmp_path, "orders", PORTALQ_STANDIN_URL=standin_server.base_url,
                   PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                   PORTALQ_RETRY_BASE_SECONDS=0.2, PORTALQ_WORKERS=3, **env)


def _person_confirms_the_filing(order_id, job_id):
    """Delaware's filing waits, then asks a person; they found it filed on eCorp2."""
    wait_until(lambda: _status(order_id, "file_entity") == "failed", 120,
               "the person asked about the filing")
    assert "eCorp2" in (queue.get_job(job_id)["last_error"] or "")
    out = run_cli("jobs", "retry", str(job_id), "--confirmed-filed", "7100037")
    assert out.returncode == 0, out.stderr


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
    mailbox = Mailbox().start()
    # in person: the IRS gives the CP 575 online, the delivery's one document (Delaware's
    # stamped certificate goes back by its return method, not through portalq)
    created = order_runs.enqueue_order("delaware_llc", "ORD-1001", {
        **DELAWARE_LLC, "applicant": "responsible_party"})
    svc = _service(db, tmp_path, standin_server, mailbox).start()
    try:
        _person_confirms_the_filing("ORD-1001", created.jobs["file_entity"])
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
    assert filed["result"]["confirmation"] == "7100037"   # as the person found it
    # the EIN step started only after the filing, with the order's name
    assert ein["payload"]["legal_name"] == "Widgets LLC"
    assert ein["payload"]["state"] == "DE" and ein["started_at"] > filed["finished_at"]
    assert jobs["deliver"]["payload"]["documents"] == [{"source_job_id": ein["id"]}]
    attached = sorted(p.get_filename() for p in mail.walk() if p.get_filename())
    assert len(attached) == 1 and "CP575" in attached[0].upper().replace("_", ""), attached
    assert len(portals.ledger(DE)) == 1 and len(portals.ledger("irs_ein")) == 1
    with psycopg.connect(dsn) as c:   # nothing waits for the order's input: erased
        assert c.execute("SELECT input_data FROM portalq.orders").fetchone()[0] is None


@pytest.mark.e2e
def test_an_escalated_filing_holds_the_ein_step_until_a_person_fixes_it(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    # the order's name lacks the ending Delaware requires: the filing fails for a person
    created = order_runs.enqueue_order("delaware_llc", "ORD-1002", {
        **DELAWARE_LLC, "legal_name": "Widgets", "applicant": "responsible_party"})
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
        _person_confirms_the_filing("ORD-1002", created.jobs["file_entity"])
        wait_until(lambda: _status("ORD-1002", "deliver") in ("completed", "failed"), 180,
                   "the rest of the order after the person's fix")
    finally:
        svc.stop()
        mailbox.stop()
    ein = queue.get_job(created.jobs["obtain_ein"])
    assert ein["status"] == "completed", ein["last_error"]
    # the EIN application carries the name as filed (the person's fix), not as the order
    # typed it -- also when a person confirmed the filing (its submission's record)
    assert ein["payload"]["legal_name"] == "Widgets LLC"
    assert queue.get_job(created.jobs["deliver"])["status"] == "completed"
    assert len(portals.ledger(DE)) == 1 and len(portals.ledger("irs_ein")) == 1


@pytest.mark.e2e
def test_cancelling_mid_way_cancels_only_what_has_not_run(
        db, dsn, tmp_path, standin_server, portals):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    created = order_runs.enqueue_order("delaware_llc", "ORD-1003", DELAWARE_LLC)
    # filed: waits for its expected decision time (48 h: no short checks here)
    svc = _service(db, tmp_path, standin_server, mailbox, check=None).start()
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
