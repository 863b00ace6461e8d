"""Issue 48 items 7 and 8: one incident is one mail thread, and the mails' headers.

The outbox (scheduler/mailer.send_due_escalations) on a real database, sending to a real SMTP
server (tests/mailbox.py), run each second of a frozen clock as the service's mail loop
runs it, while the jobs of three incidents fail one after another as they did from outside:
30 identical name rejections over 73 s (11 mails, none replying to another, with the 5 s
gather window), 8 EIN jobs uncertain after an IRS error at submit (8 mails), IRS maintenance
failing 6 jobs (3 mails). With the default settings each incident is one mail that starts a
thread, its later jobs replies in that thread."""

from __future__ import annotations

import asyncio
import email.utils
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from portalq.jobs import clock, queue
from portalq.scheduler import mailer
from portalq.scheduler.config import Settings
from tests.integration.test_mail_message import failed_job, plain, subject
from tests.mailbox import Mailbox
from tests.service_helpers import add_local_portal

CONSOLE = "https://portalq.example:8780"
START = datetime(2026, 12, 1, 15, tzinfo=UTC)
NAME = ("BC Registries rejected the name request NR {n}: the name is too similar to an "
        "existing corporation; choose other names")
SUBMIT = ("IRS answered 'Submit EIN Request' with 'Apply for EIN is experiencing a technical "
          "problem.': the application may have been accepted; check for an issued EIN")
MAINTENANCE = ("5 attempts failed; last error: PortalUnavailable: IRS Apply for EIN "
               "unavailable at the review: Apply for EIN is currently unavailable.")


def defaults(box: Mailbox) -> Settings:
    """The defaults but where the mail goes (the defaults are what is under test)."""
    return Settings(smtp_url=box.url, admin_emails="ops@example.com", console_url=CONSOLE)


def send(dsn: str, cfg: Settings) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return (await mailer.send_due_escalations(cfg, c, limit=50)).sent
    return asyncio.run(go())


def run(conn, dsn: str, cfg: Settings, failures: list[tuple[float, int, str, str]],
        until: float) -> None:
    """Each second from START to ``until`` (seconds): the jobs failing by then are
    escalated (``failures``: second, job, kind, reason), then a round of the outbox."""
    now = clock.FrozenClock(START)
    clock.set_clock(now)
    todo = sorted(failures)
    for second in range(int(until) + 1):
        now.set(START + timedelta(seconds=second))
        while todo and todo[0][0] <= second:
            _at, jid, kind, reason = todo.pop(0)
            queue.escalate(conn, jid, 1, kind, reason)
        send(dsn, cfg)


def names(mail: Any, job: int) -> bool:
    """Does ``mail`` list ``job`` (its console page's link)?"""
    return re.search(rf"{CONSOLE}/jobs/{job}\s", plain(mail)) is not None


def thread_of(mails: list[Any], jobs: list[int]) -> list[Any]:
    """The mails that name any of ``jobs``."""
    return [m for m in mails if any(names(m, j) for j in jobs)]


def assert_one_thread(mails: list[Any], jobs: list[int]) -> None:
    """One mail starts the thread, every other is a reply to it; each job in one mail."""
    roots = [m for m in mails if m["In-Reply-To"] is None]
    assert len(roots) == 1, [subject(m) for m in mails]
    root = roots[0]["Message-ID"]
    for reply in mails:
        if reply is roots[0]:
            continue
        assert reply["In-Reply-To"] == root and root in reply["References"].split()
        assert "more job" in plain(reply)
        assert subject(reply).startswith("Re: ")
    for jid in jobs:
        assert sum(names(m, jid) for m in mails) == 1, jid


def test_three_incidents_from_outside_are_one_thread_each(conn, dsn, mailbox):
    add_local_portal(dsn, code="bc")
    add_local_portal(dsn, code="irs")
    failures: list[tuple[float, int, str, str]] = []
    rejected = []
    for i in range(30):   # 30 identical name rejections over 73 s
        jid = failed_job(conn, f"ORD-N{i}", portal="bc")
        rejected.append(jid)
        failures.append((i * 73 / 29, jid, "business", NAME.format(n=1234560 + i)))
    uncertain = []
    for i in range(8):    # an IRS error at submit on 8 EIN jobs, one after another
        jid = failed_job(conn, f"ORD-U{i}", portal="irs")
        uncertain.append(jid)
        failures.append((3 + i * 17, jid, "uncertain", SUBMIT))
    maintenance = []
    for i in range(6):    # IRS maintenance on 6 jobs
        jid = failed_job(conn, f"ORD-M{i}", portal="irs")
        maintenance.append(jid)
        failures.append((10 + i * 40, jid, "attempts", MAINTENANCE))

    run(conn, dsn, defaults(mailbox), failures, until=600)
    mails = mailbox.messages
    assert conn.execute("SELECT count(*) FROM portalq.escalations WHERE sent_at IS NULL"
                        ).fetchone()[0] == 0
    for jobs in (rejected, uncertain, maintenance):
        assert_one_thread(thread_of(mails, jobs), jobs)
    # the 73 s of rejections: the first mail and a reply or two, not 11 mails
    assert len(thread_of(mails, rejected)) <= 3
    assert len(mails) == sum(len(thread_of(mails, j)) for j in (rejected, uncertain, maintenance))


def test_a_cause_that_stopped_recurring_starts_a_new_thread(conn, dsn, mailbox):
    """The same cause an hour and a half after it last recurred is a new incident."""
    add_local_portal(dsn, code="bc")
    jobs = [failed_job(conn, f"ORD-{i}", portal="bc") for i in range(2)]
    run(conn, dsn, defaults(mailbox), [(0, jobs[0], "business", NAME.format(n=1))], until=60)
    later = clock.FrozenClock(START + timedelta(minutes=90))
    clock.set_clock(later)
    queue.escalate(conn, jobs[1], 1, "business", NAME.format(n=2))
    later.advance(minutes=5)
    send(dsn, defaults(mailbox))
    first, second = mailbox.wait_for(2, 10)
    assert first["In-Reply-To"] is None and second["In-Reply-To"] is None


def test_every_mail_has_a_date_and_a_message_id_no_other_database_repeats(pg_server, db, dsn,
                                                                          conn, mailbox):
    """RFC 5322's Date header on each mail; the Message-ID of escalation 1 of one database
    is not that of escalation 1 of another (a demo rerun, a restore, staging beside
    production): a random part, and stable across the resends of one row."""
    add_local_portal(dsn)
    jid = failed_job(conn, "ORD-1")
    cfg = defaults(mailbox).model_copy(update={"mail_gather_seconds": 0})
    queue.escalate(conn, jid, 1, "business", "refused")
    assert send(dsn, cfg) == 1
    other = pg_server.create()
    try:
        other_dsn = pg_server.dsn(other)
        add_local_portal(other_dsn)
        with psycopg.connect(other_dsn, autocommit=True) as c2:
            jid2 = failed_job(c2, "ORD-1")
            assert jid2 == jid
            queue.escalate(c2, jid2, 1, "business", "refused")
        assert send(other_dsn, cfg) == 1
    finally:
        pg_server.drop(other)
    one, two = mailbox.wait_for(2, 10)
    for mail in (one, two):
        assert email.utils.parsedate_to_datetime(mail["Date"]).tzinfo is not None
        assert re.fullmatch(r"<escalation-\d+\.[0-9a-f]{16,}@portalq>", mail["Message-ID"])
    assert one["Message-ID"] != two["Message-ID"]
    # stable: the Message-ID a resend would carry is the one stored with the sent mail
    stored = conn.execute("SELECT message FROM portalq.escalations").fetchone()[0]
    assert email.message_from_bytes(bytes(stored))["Message-ID"] == one["Message-ID"]


def test_a_portal_notice_has_a_date_and_a_message_id_no_other_database_repeats(conn, dsn,
                                                                               mailbox):
    add_local_portal(dsn)
    conn.execute("INSERT INTO portalq.portal_notices (portal, kind, reason, created_at, "
                 "next_try_at) VALUES ('local', 'paused', 'outage', now(), now())")

    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return (await mailer.send_due_notices(defaults(mailbox), c)).sent
    assert asyncio.run(go()) == 1
    [mail] = mailbox.wait_for(1, 10)
    assert email.utils.parsedate_to_datetime(mail["Date"]).tzinfo is not None
    assert re.fullmatch(r"<portal-notice-1\.[0-9a-f]{16,}@portalq>", mail["Message-ID"])
