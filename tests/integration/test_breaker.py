"""Circuit breaker: a portal showing outage signs is paused (no attempts spent), probed,
and resumed by itself; admins get one notice each way."""

from __future__ import annotations

import psycopg

from portalq.jobs import queue
from tests.mailbox import Mailbox
from tests.service_helpers import Service, add_local_portal, wait_until


def test_maintenance_pauses_portal_then_resumes_and_everything_completes(db, dsn, tmp_path):
    add_local_portal(dsn, code="flaky", max_sessions=2)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("INSERT INTO flags VALUES ('maintenance')")
    mailbox = Mailbox().start()
    svc = Service(db, tmp_path, "b", PORTALQ_ADMIN_EMAILS="ops@example.com",
                  PORTALQ_SMTP_URL=mailbox.url, PORTALQ_BREAKER_THRESHOLD=3,
                  PORTALQ_BREAKER_PROBE_SECONDS=1, PORTALQ_WORKERS=4).start()
    n = 12
    try:
        ids = [j.id for j in queue.enqueue_many([
            queue.NewJob("ledger_job", f"O{i}", {"portal": "flaky", "honour_maintenance": True})
            for i in range(n)])]
        with psycopg.connect(dsn, autocommit=True) as c:
            wait_until(lambda: c.execute("SELECT paused_by FROM portalq.portals WHERE code='flaky'"
                                         ).fetchone()[0] == "breaker", 30, "breaker trips")
            [paused_mail] = mailbox.wait_for(1, 30)
            assert "flaky paused" in paused_mail["Subject"]
            # while paused: only probes reach the portal, one at a time, no attempts spent
            wait_until(lambda: c.execute("SELECT count(*) FROM ledger").fetchone()[0] >= 6,
                       30, "a few probes")
            assert c.execute("SELECT max(attempts) FROM portalq.job_queue").fetchone()[0] <= 1
            c.execute("DELETE FROM flags")  # the portal recovers
            wait_until(lambda: len(queue.list_jobs(status="completed", limit=n + 1)) == n,
                       60, "all jobs complete after recovery")
            mails = mailbox.wait_for(2, 30)
            assert c.execute("SELECT paused_at FROM portalq.portals WHERE code='flaky'").fetchone()[0] is None
            statuses = {queue.get_job(i)["status"] for i in ids}
            attempts = [queue.get_job(i)["attempts"] for i in ids]
            events = c.execute("SELECT count(*) FROM portalq.job_events WHERE to_status='failed'"
                               ).fetchone()[0]
    finally:
        svc.stop()
        mailbox.stop()
    assert statuses == {"completed"}
    assert attempts == [1] * n  # outage deferrals never spent an attempt
    assert events == 0
    subjects = [m["Subject"] for m in mails]
    assert subjects == ["[portalq] portal flaky paused", "[portalq] portal flaky resumed"]
    assert len(mailbox.messages) == 2


def test_operator_pause_and_resume_from_cli(db, dsn):
    from tests.conftest import run_cli

    assert run_cli("portals", "pause", "irs_ein", "--reason", "IRS outage").returncode == 0
    out = run_cli("portals", "pause", "irs_ein")
    assert out.returncode == 3 and "already paused" in out.stderr
    import json
    rows = {r["code"]: r for r in json.loads(run_cli("portals", "list", "--json").stdout)}
    assert rows["irs_ein"]["paused"] and rows["irs_ein"]["paused_by"] == "operator"
    assert run_cli("portals", "resume", "irs_ein").returncode == 0
    assert run_cli("portals", "resume", "irs_ein").returncode == 3
    assert run_cli("portals", "pause", "moon").returncode == 2
