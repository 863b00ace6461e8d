"""One bad row never stops the rest (issue 13): a tick with a poison row in each duty does
every other row's work in the same tick, and marks or reports the bad one.

The poison rows are made with real database errors: a NOT VALID check constraint refuses
one row's update (as a row the code cannot handle would), a foreign key from another table
keeps one finished job from being deleted, and the SMTP server refuses one message for
good (554)."""

from __future__ import annotations

import asyncio
import email
from datetime import timedelta
from typing import Any

import psycopg
from aiosmtpd.controller import Controller

from portalq.jobs import clock
from portalq.scheduler.config import Settings
from portalq.scheduler.tick import Tick
from portalq.scheduler.worker import Worker, make_pool
from tests.ports import free_port
from tests.service_helpers import add_local_portal, weekday_after_server_start


class _RefusePoison:
    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        subject = str(email.message_from_bytes(envelope.content)["Subject"])
        if "POISON-M" in subject:
            return "554 5.6.0 message refused"
        self.subjects.append(subject)
        return "250 OK"


def _job(c, order_id, portal, status="pending", **cols):
    names = ", ".join(cols)
    values = "".join(f", %({k})s" for k in cols)
    return c.execute(
        f"INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at, "
        f"created_at, updated_at{', ' + names if cols else ''}) VALUES ('ledger_job', "
        f"%(o)s, %(p)s, '{{}}', %(s)s, %(t)s, %(t)s, %(t)s{values}) RETURNING id",
        {"o": order_id, "p": portal, "s": status, "t": clock.now() - timedelta(hours=1), **cols}
    ).fetchone()[0]


def test_a_poison_row_in_every_duty_leaves_the_other_rows_done(db, dsn, conn, tmp_path):
    tuesday = weekday_after_server_start(conn, 1, 15)
    clock.set_clock(clock.FrozenClock(tuesday))
    add_local_portal(dsn, "open24")
    for code in ("closed_a", "closed_b"):   # open Mondays 09:00-10:00 UTC only
        conn.execute("INSERT INTO portalq.portals (code, name, timezone) VALUES (%s, %s, 'UTC')",
                     (code, code))
        conn.execute("INSERT INTO portalq.portal_hours (portal, weekday, opens, closes) "
                     "VALUES (%s, 0, '09:00', '10:00')", (code,))
    # deferral: closed_a's jobs cannot be deferred
    poison_defer = _job(conn, "D-POISON", "closed_a")
    good_defer = _job(conn, "D-GOOD", "closed_b")
    conn.execute("ALTER TABLE portalq.job_queue ADD CONSTRAINT poison_defer CHECK "
                 "(portal <> 'closed_a' OR status <> 'deferred') NOT VALID")
    # rescue: one stale job cannot be put back
    stale = tuesday - timedelta(minutes=5)
    poison_rescue = _job(conn, "R-POISON", "open24", "running", lock_owner="dead",
                         heartbeat_at=stale, attempts=1)
    good_rescue = _job(conn, "R-GOOD", "open24", "running", lock_owner="dead",
                       heartbeat_at=stale, attempts=1)
    conn.execute("ALTER TABLE portalq.job_queue ADD CONSTRAINT poison_rescue CHECK "
                 "(order_id <> 'R-POISON' OR status <> 'pending') NOT VALID")
    # outbox: one mail is refused for good; one order id has a line break (stored before
    # they were refused): it must not break its mail. Three causes: three mails (one
    # cause would be one incident, one mail)
    for order_id, cause in (("M-POISON-M", "x"), ("M-GOOD", "y"), ("M-LINE\nBREAK", "z")):
        jid = _job(conn, order_id, "open24", "failed", attempts=5)
        conn.execute("INSERT INTO portalq.escalations (job_id, attempt, kind, reason, created_at, "
                     "next_try_at) VALUES (%s, 5, 'attempts', %s, %s, %s)",
                     (jid, cause, stale, stale))
    # prune: one finished job is still referred to by another table
    old = tuesday - timedelta(days=60)
    poison_prune = _job(conn, "P-POISON", "open24", "completed", finished_at=old)
    good_prune = _job(conn, "P-GOOD", "open24", "completed", finished_at=old)
    conn.execute("CREATE TABLE invoices (job_id bigint REFERENCES portalq.job_queue (id))")
    conn.execute("INSERT INTO invoices VALUES (%s)", (poison_prune,))

    handler = _RefusePoison()
    port = free_port()
    smtp = Controller(handler, hostname="127.0.0.1", port=port)
    smtp.start()
    settings = Settings(database_url=db, admin_emails="ops@example.com",
                        smtp_url=f"smtp://127.0.0.1:{port}", artifacts_dir=tmp_path / "a",
                        node_id="leader")

    async def one_tick() -> dict[str, int]:
        pool = make_pool(settings, dsn)
        await pool.open(wait=True)
        try:
            worker = Worker(settings, pool, dsn)
            await worker.refresh_portals()
            return await Tick(settings, worker, dsn).duties()
        finally:
            await pool.close()

    try:
        summary = asyncio.run(one_tick())
    finally:
        smtp.stop()

    def status(job_id: int) -> str:
        return conn.execute("SELECT status FROM portalq.job_queue WHERE id = %s", (job_id,)).fetchone()[0]

    # the good rows' work was done in this one tick
    assert status(good_defer) == "deferred" and status(poison_defer) == "pending"
    assert status(good_rescue) == "pending" and status(poison_rescue) == "running"
    assert sorted(handler.subjects) == sorted(
        [s for s in handler.subjects if "M-GOOD" in s or "M-LINE BREAK" in s])
    assert len(handler.subjects) == 2
    pruned = conn.execute("SELECT id FROM portalq.job_queue WHERE order_id LIKE 'P-%'").fetchall()
    assert pruned == [(poison_prune,)]
    assert good_prune not in [r[0] for r in pruned]
    # the bad rows are marked or reported
    refused = conn.execute(
        "SELECT e.sent_at, e.last_send_error, e.next_try_at FROM portalq.escalations e "
        "JOIN portalq.job_queue j ON j.id = e.job_id WHERE j.order_id = 'M-POISON-M'").fetchone()
    assert refused[0] is None and "554" in refused[1] and refused[2] > tuesday
    assert "rescue failed" in conn.execute(
        "SELECT last_error FROM portalq.job_queue WHERE id = %s", (poison_rescue,)).fetchone()[0]
    assert summary["deferred"] == 1 and summary["rescued"] == 1
    assert summary["escalations_sent"] == 2 and summary["pruned"] == 1
    with psycopg.connect(dsn) as c:   # a later tick does not re-send what went out
        assert c.execute("SELECT count(*) FROM portalq.escalations WHERE sent_at IS NOT NULL"
                         ).fetchone()[0] == 2
