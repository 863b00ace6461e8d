"""Issue 39 item 7: the escalation mail as a real message, received by a real SMTP server
(tests/mailbox.py) from the real outbox (scheduler/mailer.send_due_escalations on a real
database): one outage that fails twenty jobs is one mail listing them; each mail has a
text and an HTML part, the last screenshot inline, links to the job's page and to the form
that answers, the actions of its kind, the checkpoint as lines, the job's mails threaded;
no written form of a job's SSN in any part of any mail."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import psycopg
import pytest

from portalq.jobs import clock, queue
from portalq.scheduler import mailer
from portalq.scheduler.config import Settings
from tests import checkpoints, payloads
from tests.mailbox import Mailbox
from tests.service_helpers import Service, add_local_portal, wait_until

CONSOLE = "https://portalq.example:8780"
OUTAGE = "{n} attempts failed; last error: PortalUnavailable: HTTP 503 at {t}"


def png() -> bytes:
    """A real 1x1 PNG (a screenshot as the flows save it)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def settings(box: Mailbox, **kw: Any) -> Settings:
    return Settings(smtp_url=box.url, admin_emails="ops@example.com", console_url=CONSOLE,
                    **{"mail_gather_seconds": 0, **kw})


def send(dsn: str, cfg: Settings) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return (await mailer.send_due_escalations(cfg, c, limit=50)).sent
    return asyncio.run(go())


def failed_job(conn, order_id: str, *, job_type: str = "ledger_job", payload=None,
               portal: str = "local", checkpoint=None, error: str = "boom") -> int:
    if job_type == "ledger_job":
        payload = {"portal": portal}
    job = queue.enqueue(job_type, order_id, payload or {}, conn=conn)
    conn.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = max_attempts, "
                 "finished_at = %s, checkpoint = %s, last_error = %s WHERE id = %s",
                 (clock.now(), json.dumps(checkpoint or {}), error, job.id))
    return job.id


def screenshot(conn, job_id: int, folder: Path) -> Path:
    path = folder / f"{job_id}-01-failure.png"
    path.write_bytes(png())
    conn.execute("INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, created_at) "
                 "VALUES (%s, 1, 'screenshot', %s, %s)", (job_id, str(path), clock.now()))
    return path


def plain(msg) -> str:
    return next(p for p in msg.walk() if p.get_content_type() == "text/plain"
                ).get_payload(decode=True).decode()


def html(msg) -> str:
    return next(p for p in msg.walk() if p.get_content_type() == "text/html"
                ).get_payload(decode=True).decode()


def subject(msg) -> str:
    return " ".join(str(msg["Subject"]).split())


def sent_at(conn) -> list[bool]:
    return [r[0] is not None for r in conn.execute(
        "SELECT sent_at FROM portalq.escalations ORDER BY id")]


def test_one_outage_failing_twenty_jobs_sends_one_mail_that_lists_them(conn, dsn, mailbox,
                                                                       tmp_path):
    """Twenty jobs failed by one outage of ``local`` (their reasons differ only in their
    numbers), with a job of another cause on the same portal and one on another portal:
    three mails, the outage's listing its twenty jobs each with its link and action; every
    escalation marked sent once; a second round sends nothing."""
    add_local_portal(dsn)
    add_local_portal(dsn, code="other")
    ids = []
    for i in range(20):
        jid = failed_job(conn, f"ORD-{1000 + i}")
        queue.escalate(conn, jid, 5, "attempts", OUTAGE.format(n=5 - i % 2, t=f"22:0{i % 10}"))
        ids.append(jid)
    refused = failed_job(conn, "ORD-REFUSED")
    queue.escalate(conn, refused, 1, "business", "name not available")
    elsewhere = failed_job(conn, "ORD-ELSE", portal="other")
    queue.escalate(conn, elsewhere, 5, "attempts", OUTAGE.format(n=5, t="22:00"))

    assert send(dsn, settings(mailbox)) == 22
    mails = mailbox.wait_for(3, 10)
    assert len(mails) == 3
    [incident] = [m for m in mails if "20 jobs on local" in subject(m)]
    text, page = plain(incident), html(incident)
    for jid in ids:
        assert f"{CONSOLE}/jobs/{jid}" in text and f'href="{CONSOLE}/jobs/{jid}"' in page
        assert f"portalq jobs retry {jid}" in text
    assert "ORD-REFUSED" not in text and "ORD-ELSE" not in text
    assert f"{CONSOLE}/jobs?status=failed&amp;portal=local" in page
    [alone] = [m for m in mails if m is not incident and "ORD-REFUSED" in subject(m)]
    assert "business" in subject(alone)
    # every escalation sent, the incident's all with the one mail as stored
    assert sent_at(conn) == [True] * 22
    stored = {bytes(r[0]) for r in conn.execute(
        "SELECT message FROM portalq.escalations WHERE job_id = ANY(%s)", (ids,))}
    assert len(stored) == 1
    assert send(dsn, settings(mailbox)) == 0 and len(mailbox.messages) == 3


def test_the_first_of_an_incident_waits_for_the_rest_of_it(conn, dsn, mailbox):
    """Jobs fail one after another during an outage: the first escalation waits the gather
    window (PORTALQ_MAIL_GATHER_SECONDS) and goes out with those written meanwhile."""
    add_local_portal(dsn)
    now = clock.FrozenClock(datetime(2026, 12, 1, 15, tzinfo=UTC))
    clock.set_clock(now)
    cfg = settings(mailbox, mail_gather_seconds=10)
    first = failed_job(conn, "ORD-1")
    queue.escalate(conn, first, 5, "attempts", OUTAGE.format(n=5, t="15:00"))
    assert send(dsn, cfg) == 0   # held: not due before 15:00:10, no attempt counted
    assert conn.execute("SELECT next_try_at, send_attempts FROM portalq.escalations"
                        ).fetchone() == (now() + timedelta(seconds=10), 0)
    now.advance(seconds=4)
    later = [failed_job(conn, f"ORD-{i}") for i in (2, 3)]
    for jid in later:
        queue.escalate(conn, jid, 5, "attempts", OUTAGE.format(n=5, t="15:04"))
    assert send(dsn, cfg) == 0
    now.advance(seconds=6)
    assert send(dsn, cfg) == 3
    [mail] = mailbox.wait_for(1, 10)
    assert "3 jobs on local" in subject(mail)
    assert sent_at(conn) == [True] * 3


def test_a_mail_has_text_html_the_screenshot_inline_links_and_its_thread(conn, dsn, mailbox,
                                                                         tmp_path):
    add_local_portal(dsn)
    jid = failed_job(conn, "ORD-1001", checkpoint={
        "submissions": {"name_request": {"state": "submitted", "number": "NR 1234567"}},
        "step": "submit"}, error="<script>alert('x')</script> Timeout")
    shot = screenshot(conn, jid, tmp_path)
    queue.escalate(conn, jid, 5, "attempts", "5 attempts failed")
    assert send(dsn, settings(mailbox)) == 1
    queue.escalate(conn, jid, 6, "business", "rejected: the name is taken")
    assert send(dsn, settings(mailbox)) == 1
    first, second = mailbox.wait_for(2, 10)

    assert first.get_content_type() == "multipart/alternative"
    text_part, related = first.get_payload()
    assert text_part.get_content_type() == "text/plain"
    assert related.get_content_type() == "multipart/related"
    html_part, image = related.get_payload()
    assert html_part.get_content_type() == "text/html"
    # the screenshot inline, referred to by its Content-ID from the HTML
    assert image.get_content_type() == "image/png" and image.get_payload(decode=True) == png()
    cid = image["Content-ID"].strip("<>")
    assert f'src="cid:{cid}"' in html(first) and image.get_filename() == shot.name
    # links to the job's page; hostile portal text shown as text, never markup
    page, text = html(first), plain(first)
    assert f'href="{CONSOLE}/jobs/{jid}"' in page and f"{CONSOLE}/jobs/{jid}" in text
    assert "<script>" not in page and "&lt;script&gt;" in page and "<script>" in text
    # the checkpoint as readable lines, not a Python dict
    assert "submissions / name_request / state: submitted" in text
    assert "submissions / name_request / state: submitted" in page
    assert "{'" not in text and "{&#39;" not in page
    # the subject says what, where and why
    assert subject(first) == (f"[portalq] attempts: ledger_job job {jid} for ORD-1001 "
                                "failed on local: 5 attempts failed")
    # threaded: a stable Message-ID per escalation, the job's later mails under its first
    one, two = (f"<escalation-{i}.{t}@portalq>" for i, t in conn.execute(
        "SELECT id, mail_token FROM portalq.escalations ORDER BY id"))
    assert (first["Message-ID"], second["Message-ID"]) == (one, two)
    assert first["In-Reply-To"] is None
    assert second["In-Reply-To"] == first["Message-ID"] == second["References"]
    # the console shows the stored mail: its text, and the screenshot it carried
    from portalq.jobs.admin.reads import mail_text

    stored = conn.execute("SELECT message FROM portalq.escalations ORDER BY id").fetchone()[0]
    shown = mail_text(stored)
    assert "submissions / name_request / state: submitted" in shown
    assert f"[attached: {shot.name}" in shown


def _actions(msg: EmailMessage) -> str:
    return plain(msg).split("To act:", 1)[1]


@pytest.mark.parametrize(("kind", "labels", "anchors", "never"), [
    ("question", ["Answer the question"], ["#answer"], ["cancel", "retry"]),
    ("approval", ["Approve", "Reject"], ["#approve", "#reject"], ["cancel"]),
    ("uncertain", ["It was filed", "It was not filed"], ["#confirm-filed", "#not-filed"],
     ["cancel"]),
])
def test_each_kind_offers_its_own_actions_with_the_page_that_answers(
        conn, dsn, mailbox, tmp_path, kind, labels, anchors, never):
    add_local_portal(dsn)
    jid = failed_job(conn, "ORD-7")
    if kind in ("question", "approval"):   # the job waits for a person
        conn.execute("UPDATE portalq.job_queue SET status = 'deferred' WHERE id = %s", (jid,))
    if kind == "approval":   # its attempt ended: the review page's screenshot recorded
        screenshot(conn, jid, tmp_path)
    queue.escalate(conn, jid, 1, kind, f"{kind} reason")
    assert send(dsn, settings(mailbox)) == 1
    [mail] = mailbox.wait_for(1, 10)
    acts, page = _actions(mail), html(mail)
    for label, anchor in zip(labels, anchors, strict=True):
        assert label in acts
        assert f"{CONSOLE}/jobs/{jid}{anchor}" in acts and f"{CONSOLE}/jobs/{jid}{anchor}" in page
    first_action = page.split("What to do", 1)[1].split("</li>", 1)[0]
    assert labels[0] in first_action
    for word in never:
        assert word not in acts.lower() and word not in first_action.lower()


def test_a_failed_job_offers_retry_first_and_cancel_only_before_its_submission(conn, dsn,
                                                                              mailbox):
    add_local_portal(dsn)
    before = failed_job(conn, "ORD-A")
    queue.escalate(conn, before, 5, "attempts", "cause one")
    past = failed_job(conn, "ORD-B", checkpoint=checkpoints.in_doubt())
    queue.escalate(conn, past, 5, "attempts", "cause two")
    assert send(dsn, settings(mailbox)) == 2
    mails = {subject(m).split(" job ")[1].split()[0]: m for m in mailbox.wait_for(2, 10)}
    acts = _actions(mails[str(before)])
    assert acts.index(f"portalq jobs retry {before}") < acts.index(f"portalq jobs cancel {before}")
    first_action = html(mails[str(before)]).split("What to do", 1)[1].split("</li>", 1)[0]
    assert "Retry" in first_action and "cancel" not in first_action.lower()
    acts = _actions(mails[str(past)])
    assert f"portalq jobs retry {past}" in acts and "cancel" not in acts.lower()


def _forms(ssn: str) -> dict[str, str]:
    digits = ssn.replace("-", "")
    return {"dashed": ssn, "bare": digits, "spaced": f"{digits[:3]} {digits[3:5]} {digits[5:]}"}


def _texts(msg) -> list[bytes]:
    """Every text of a received mail: the raw message, each header, each part decoded."""
    out = [msg.as_bytes()] + [str(v).encode() for _k, v in msg.items()]
    out += [p.get_payload(decode=True) or b"" for p in msg.walk() if not p.is_multipart()]
    return out


def test_no_written_form_of_the_ssn_in_any_part_of_a_mail_or_an_incidents_mail(
        conn, dsn, mailbox, tmp_path):
    """The job's SSN planted in its error (bare), checkpoint (spaced), a non-secret payload
    field (spaced) and the escalation's reason (dashed) -- of one job's mail and of an
    incident's: no part of either holds any of its forms."""
    forms = _forms(payloads.OBTAIN_EIN["responsible_party"]["ssn"])
    payload = {**payloads.OBTAIN_EIN,
               "principal_activity": f"Software for owner {forms['spaced']}"}
    jobs = []
    for order in ("ORD-SSN-1", "ORD-SSN-2", "ORD-SSN-3"):
        jid = failed_job(conn, order, job_type="obtain_ein", payload=payload,
                         checkpoint={"step": "submit", "note": f"typed {forms['spaced']}"},
                         error=f"portal echoed the SSN {forms['bare']} back")
        screenshot(conn, jid, tmp_path)
        jobs.append(jid)
    queue.escalate(conn, jobs[0], 1, "business", f"rejected: SSN {forms['dashed']} unknown")
    for jid in jobs[1:]:   # one incident of two jobs
        queue.escalate(conn, jid, 1, "attempts", f"refused {forms['dashed']} at 10:0{jid}")
    assert send(dsn, settings(mailbox)) == 3
    mails = mailbox.wait_for(2, 10)
    assert len(mails) == 2 and any("2 jobs" in subject(m) for m in mails)
    for mail in mails:
        texts = _texts(mail)
        assert b"portal echoed the SSN" in b"\n".join(texts)
        assert any(p.get_content_type() == "text/html" for p in mail.walk())
        for name, form in forms.items():
            for text in texts:
                assert form.encode() not in text, f"{name} form in {subject(mail)}"


@pytest.mark.e2e
def test_a_running_service_mails_one_outage_of_twenty_jobs_once(db, dsn, tmp_path):
    """The same through ``portalq run``: twenty jobs fail on their one attempt (the portal
    answers each with the same error) within the gather window: one mail lists them."""
    add_local_portal(dsn)
    box = Mailbox().start()
    svc = Service(db, tmp_path, "mail", PORTALQ_ADMIN_EMAILS="ops@example.com",
                  PORTALQ_SMTP_URL=box.url, PORTALQ_CONSOLE_URL=CONSOLE,
                  PORTALQ_MAIL_GATHER_SECONDS=30, PORTALQ_WORKERS=4).start()
    try:
        ids = [j.id for j in queue.enqueue_many([
            queue.NewJob("ledger_job", f"ORD-{i}", {"fail_times": 1}, max_attempts=1)
            for i in range(20)])]
        with psycopg.connect(dsn, autocommit=True) as c:
            wait_until(lambda: c.execute("SELECT count(*) FROM portalq.escalations WHERE "
                                         "sent_at IS NOT NULL").fetchone()[0] == 20,
                       90, "the twenty escalations sent")
        [mail] = box.messages
    finally:
        svc.stop()
        box.stop()
    assert "20 jobs on local" in subject(mail)
    text = plain(mail)
    assert all(f"{CONSOLE}/jobs/{i}" in text for i in ids)
