"""Issue 48 item 9: mails that suggested the wrong action or left out what to judge.

The outbox (scheduler/mailer.send_due_escalations) on a real database, to a real SMTP server:
a rejected name's mail offers new names first (not "Retry once the cause is gone", which
fails the same way); the approval mail carries the review page's screenshot (it was sent
before the attempt's evidence was recorded); checkpoints never print Python lists; a console
address that is not http(s) stops ``portalq run`` at start (its links were ``javascript:``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portalq.jobs import clock, queue
from portalq.scheduler.mail_compose import checkpoint_lines
from tests import payloads
from tests.acceptance.test_bad_input_issue35 import one_line
from tests.conftest import run_cli
from tests.integration.test_mail_message import (
    CONSOLE,
    failed_job,
    html,
    plain,
    png,
    screenshot,
    send,
    settings,
)
from tests.service_helpers import add_local_portal

REJECTED = ("BC Registries rejected the name request NR 1234567: the names are too similar "
            "to existing corporations")


def _first_action(msg) -> tuple[str, str]:
    """The first action of the text part's "To act:" and of the HTML's "What to do"."""
    text = plain(msg).split("To act:", 1)[1].strip().splitlines()
    page = html(msg).split("What to do", 1)[1].split("</li>", 1)[0]
    return "\n".join(text[:3]), page


def test_a_rejected_name_offers_new_names_first(conn, dsn, mailbox):
    jid = failed_job(conn, "ORD-N", job_type="name_search", payload=payloads.NAME_SEARCH)
    queue.escalate(conn, jid, 1, "business", REJECTED)
    assert send(dsn, settings(mailbox)) == 1
    [mail] = mailbox.wait_for(1, 10)
    text, page = _first_action(mail)
    for first in (text, page):
        assert "new names" in first.lower() and "once the cause is gone" not in first
    assert f"portalq jobs retry {jid} --payload-patch" in text and '"names"' in text
    assert f"{CONSOLE}/jobs/{jid}#edit" in text and f"{CONSOLE}/jobs/{jid}#edit" in page
    assert "once the cause is gone" not in plain(mail)


def _approval_asked(conn, dsn: str, order: str, status: str) -> tuple[clock.FrozenClock, int]:
    """A job whose attempt (``status``: running, or ended) asked for an approval."""
    add_local_portal(dsn)
    now = clock.FrozenClock(datetime(2026, 12, 1, 15, tzinfo=UTC))
    clock.set_clock(now)
    jid = failed_job(conn, order)
    conn.execute("UPDATE portalq.job_queue SET status = %s, attempts = 1 WHERE id = %s",
                 (status, jid))
    queue.escalate(conn, jid, 1, "approval", "at the review page: approve or reject")
    return now, jid


def test_the_approval_mail_carries_the_review_page_screenshot(conn, dsn, mailbox, tmp_path):
    """The approval is written while the attempt runs; its evidence is recorded when the
    attempt ends: the mail waits for it (a while at most), then shows it inline."""
    now, jid = _approval_asked(conn, dsn, "ORD-A", "running")
    assert send(dsn, settings(mailbox)) == 0          # the attempt's evidence not there yet
    conn.execute("UPDATE portalq.job_queue SET status = 'deferred' WHERE id = %s", (jid,))
    shot = screenshot(conn, jid, tmp_path)            # recorded as the attempt ends
    now.advance(seconds=2)
    assert send(dsn, settings(mailbox)) == 1
    [mail] = mailbox.wait_for(1, 10)
    images = [p for p in mail.walk() if p.get_content_type() == "image/png"]
    assert [p.get_filename() for p in images] == [shot.name]
    assert images[0].get_payload(decode=True) == png()


def test_an_approval_whose_evidence_never_comes_is_mailed_all_the_same(conn, dsn, mailbox):
    now, jid = _approval_asked(conn, dsn, "ORD-B", "deferred")
    assert send(dsn, settings(mailbox)) == 0
    now.advance(seconds=61)
    assert send(dsn, settings(mailbox)) == 1
    [mail] = mailbox.wait_for(1, 10)
    assert "(no screenshot of the review page was recorded)" in plain(mail)


def test_checkpoints_print_no_python_lists():
    lines = checkpoint_lines({"names": ["A Ltd", "B Ltd"],
                              "results": [["A Ltd", "rejected"], ["B Ltd", "approved"]],
                              "flags": [None, True, False], "steps": ("one", "two")})
    joined = "\n".join(lines)
    for python in ("[", "]", "(", ")", "None", "True", "False", "'"):
        assert python not in joined, joined
    assert "results #1: A Ltd, rejected" in lines and "names: A Ltd, B Ltd" in lines
    assert "flags: -, yes, no" in lines and "steps: one, two" in lines


@pytest.mark.parametrize("url", ["javascript:alert(1)//", "file:///etc/passwd",
                                 "data:text/html,x", "portalq.example:8780", "https://"])
def test_a_console_address_that_is_not_http_stops_run_at_start(db, url):
    out = run_cli("run", env={"PORTALQ_CONSOLE_URL": url}, timeout=60)
    one_line(out, "PORTALQ_CONSOLE_URL", "http")
