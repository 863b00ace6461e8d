"""Issue 35 item 9: a filed job is never offered for cancel. A job on a portal with a lookup
whose attempts ended past its submission gets one automatic lookup before a person is
asked; its mail never offers cancel nor shows a lookup answer older than the submission
in doubt."""

from __future__ import annotations

import psycopg
import pytest

from portalq.jobs import queue
from tests import payloads
from tests.mailbox import Mailbox
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PORTAL = "delaware_icis"


def _run(db, dsn, tmp_path, standin_server, **settings):
    open_all_hours(dsn)
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "look", PORTALQ_STANDIN_URL=standin_server.base_url,
                  PORTALQ_ADMIN_EMAILS="ops@example.com", PORTALQ_SMTP_URL=mailbox.url,
                  PORTALQ_RETRY_BASE_SECONDS=0.2, **settings).start()
    try:
        # its only attempt files and loses the answer (or gets an error after pressing)
        job = queue.enqueue("file_entity", "ORD-DE", payloads.FILE_ENTITY_DE, max_attempts=1)
        wait_until(lambda: queue.get_job(job.id)["status"] in ("completed", "failed"), 120,
                   "the job is final")
        row = queue.get_job(job.id)
        with psycopg.connect(dsn, autocommit=True) as c:
            escalations = c.execute("SELECT kind FROM portalq.escalations").fetchall()
        mails = mailbox.wait_for(len(escalations), 30) if escalations else []
    finally:
        svc.stop()
        mailbox.stop()
    return row, [e[0] for e in escalations], mails


def test_a_filing_whose_answer_was_lost_is_looked_up_not_offered_for_cancel(
        db, dsn, tmp_path, standin_server, portals):
    portals.control(PORTAL, drop_after_submit=True)
    row, escalations, _ = _run(db, dsn, tmp_path, standin_server)
    [entry] = portals.ledger(PORTAL)   # filed once
    assert (row["status"], escalations) == ("completed", []), row["last_error"]
    assert str(row["result"]["file_number"]) == str(entry["file_number"])
    assert row["checkpoint"]["reconciled"] == "found"


def test_a_lookup_that_finds_nothing_asks_a_person_without_cancel(
        db, dsn, tmp_path, standin_server, portals):
    # the submit errors after the click: the lookup finds nothing. Delaware queues filings,
    # so "not found" cannot say "not filed": the job waits on the portal (never files
    # again) and, past the declared window (shortened here), goes to a person
    portals.control(PORTAL, error_code="E503", error_times=2)
    row, escalations, mails = _run(db, dsn, tmp_path, standin_server,
                                   PORTALQ_PORTAL_CHECK_SECONDS="1",
                                   PORTALQ_LOST_ANSWER_WINDOW_SECONDS="3")
    assert row["status"] == "failed" and len(escalations) == 1, (row, escalations)
    [mail] = mails
    body = next(p for p in mail.walk() if p.get_content_type() == "text/plain"
                ).get_payload(decode=True).decode()
    act = body.split("To act:", 1)[1]
    assert f"portalq jobs retry {row['id']}" in act
    assert "cancel" not in act
    # (its reconciled=not_found is the lookup made after the doubt, not an older one)
    assert portals.ledger(PORTAL) == []         # submitted once (refused), never again
