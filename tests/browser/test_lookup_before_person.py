"""Issue 35 item 9: a filed job is never offered for cancel. A Delaware filing whose answer
after the payment is unknown goes to a person (no page known to exist can look it up,
issue 53); the mail never offers cancel."""

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


def _act(mail) -> str:
    body = next(p for p in mail.walk() if p.get_content_type() == "text/plain"
                ).get_payload(decode=True).decode()
    return body.split("To act:", 1)[1]


def test_a_filing_whose_answer_was_lost_goes_to_a_person_not_offered_for_cancel(
        db, dsn, tmp_path, standin_server, portals):
    # no page known to exist can find a Delaware request whose answer was lost (issue 53):
    # a person is asked at once, told to check, never offered cancel; filed once
    portals.control(PORTAL, drop_after_submit=True)
    row, escalations, mails = _run(db, dsn, tmp_path, standin_server)
    assert (row["status"], escalations) == ("failed", ["uncertain"]), row["last_error"]
    assert len(portals.ledger(PORTAL)) == 1
    act = _act(mails[0])
    assert f"portalq jobs retry {row['id']} --confirmed-filed" in act
    assert "cancel" not in act


def test_an_error_after_the_click_asks_a_person_without_cancel(
        db, dsn, tmp_path, standin_server, portals):
    # the submit errors after the click: the flow cannot know whether it was taken (no
    # source shows eCorp2's refusals), so a person is asked -- never a second submission
    portals.control(PORTAL, error_code="E503", error_times=2)
    row, escalations, mails = _run(db, dsn, tmp_path, standin_server)
    assert row["status"] == "failed" and escalations == ["uncertain"], (row, escalations)
    [mail] = mails
    act = _act(mail)
    assert f"portalq jobs retry {row['id']}" in act
    assert "cancel" not in act
    assert portals.ledger(PORTAL) == []         # submitted once (refused), never again
