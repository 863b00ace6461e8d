"""Real `portalq run` processes: exactly-once draining, SIGKILL rescue, SIGTERM drain."""

from __future__ import annotations

import signal
import time

import psycopg
import pytest

from portalq.jobs import queue
from tests.service_helpers import Service, add_local_portal, wait_until


def ledger_stats(dsn: str) -> tuple[int, int, int]:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*), count(DISTINCT job_id), "
                         "count(*) FILTER (WHERE ended IS NOT NULL) FROM ledger").fetchone()


def status_counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as c:
        return dict(c.execute("SELECT status, count(*) FROM portalq.job_queue GROUP BY 1").fetchall())


@pytest.mark.slow
def test_two_processes_drain_10000_jobs_exactly_once(db, dsn, tmp_path):
    add_local_portal(dsn)
    n = 10_000
    queue.enqueue_many([queue.NewJob("ledger_job", f"O{i}", {}) for i in range(n)])
    # a node starved of CPU for seconds (a busy machine) must not fence itself mid-run: this
    # test is about claims, and a fenced run's ledger row would read as a second run
    nodes = [Service(db, tmp_path, f"n{i}", PORTALQ_WORKERS=50, PORTALQ_STALE_AFTER_SECONDS=30
                     ).start() for i in range(2)]
    try:
        wait_until(lambda: status_counts(dsn).get("completed") == n, 240, "all jobs completed")
    finally:
        for s in nodes:
            s.stop()
    runs, distinct, ended = ledger_stats(dsn)
    assert (runs, distinct, ended) == (n, n, n)  # every job ran, none twice
    with psycopg.connect(dsn) as c:
        per_node = dict(c.execute("SELECT node, count(*) FROM ledger GROUP BY 1").fetchall())
        assert set(per_node) == {"n0", "n1"}, per_node  # both processes took part
        events = c.execute("SELECT count(*) FROM portalq.job_events WHERE to_status='completed'"
                           ).fetchone()[0]
        assert events == n


def test_sigkilled_worker_job_is_rescued_and_completes(db, dsn, tmp_path):
    add_local_portal(dsn)
    victim = Service(db, tmp_path, "victim", PORTALQ_STALE_AFTER_SECONDS=3).start()
    job = queue.enqueue("ledger_job", "O1", {"sleep_ms": 60_000})
    wait_until(lambda: ledger_stats(dsn)[0] == 1, 30, "the handler to start")
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    victim.stop()
    assert queue.get_job(job.id)["status"] == "running"  # held by a dead worker
    # the job must now complete elsewhere (a rescuer + another node); shorten its work
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("UPDATE portalq.job_queue SET payload = '{\"sleep_ms\": 0}' WHERE id = %s", (job.id,))
    other = Service(db, tmp_path, "other", PORTALQ_STALE_AFTER_SECONDS=3).start()
    try:
        wait_until(lambda: queue.get_job(job.id)["status"] == "completed", 60, "rescue")
    finally:
        other.stop()
    row = queue.show_job(job.id)
    # the crashed run was refunded (a crash is not the job's fault) and counted
    assert (row["attempts"], row["crashes"]) == (1, 1)
    transitions = [(e["from_status"], e["to_status"]) for e in row["events"]]
    assert ("running", "pending") in transitions  # the rescue
    with psycopg.connect(dsn) as c:
        nodes = [r[0] for r in c.execute("SELECT node FROM ledger ORDER BY id").fetchall()]
    assert nodes == ["victim", "other"]


def test_sigterm_lets_running_jobs_finish_then_exits_zero(db, dsn, tmp_path):
    add_local_portal(dsn)
    svc = Service(db, tmp_path, "t", PORTALQ_GRACE_SECONDS=20).start()
    ids = [j.id for j in queue.enqueue_many(
        [queue.NewJob("ledger_job", f"O{i}", {"sleep_ms": 1500}) for i in range(3)])]
    wait_until(lambda: ledger_stats(dsn)[0] == 3, 30, "three handlers running")
    t0 = time.monotonic()
    svc.signal(signal.SIGTERM)
    assert svc.wait(25) == 0
    assert time.monotonic() - t0 < 20
    svc.stop()
    assert {queue.get_job(i)["status"] for i in ids} == {"completed"}


def test_sigterm_past_grace_releases_unfinished_jobs(db, dsn, tmp_path):
    add_local_portal(dsn)
    svc = Service(db, tmp_path, "t", PORTALQ_GRACE_SECONDS=1).start()
    job = queue.enqueue("ledger_job", "O1", {"hang": True})
    wait_until(lambda: ledger_stats(dsn)[0] == 1, 30, "the handler to start")
    svc.signal(signal.SIGTERM)
    assert svc.wait(20) == 0
    svc.stop()
    row = queue.get_job(job.id)
    assert (row["status"], row["attempts"], row["lock_owner"]) == ("pending", 0, None)
