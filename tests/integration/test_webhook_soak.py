"""The webhook soak (issue 48 #1, #2, #18): a running ``portalq run`` sends the events of a
steady stream of cancellations to four subscriptions at once -- a good endpoint, one whose
stored URL cannot be sent to (port 99999), one that trickles its answer a byte every 3 s
(cut at the 10 s deadline) and one down for the first 60 s. The good one gets every event,
in order, promptly all along (duplicates, at least once, counted); the one that was down
gets everything by itself at its next backoff step after it is back (no ``resume``); no
session of the database sits idle in a transaction while a delivery is on the network.

Real time, real defaults (10 s deadline; backoff 5 s, 30 s, 2 min: the endpoint down from
0 s to 60 s is tried at about 0, 5, 35 and 155 s): about three minutes."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from portalq.jobs import clock, queue
from portalq.jobs.business import webhooks
from tests import payloads
from tests.integration.test_webhook_faults import attempts
from tests.service_helpers import Service, wait_until
from tests.webhook_receiver import Receiver, SlowReceiver, stored_unchecked

pytestmark = pytest.mark.slow

EVENTS = 90              # one a second
OUTAGE_SECONDS = 60


class IdleInTransaction:
    """Samples pg_stat_activity every 0.1 s: the longest a session of the test's database
    was seen idle in a transaction."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.longest = dsn, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            while not self._stop.wait(0.1):
                for (age,) in c.execute(
                        "SELECT extract(epoch FROM now() - state_change)::float "
                        "FROM pg_stat_activity WHERE datname = current_database() "
                        "AND state = 'idle in transaction'").fetchall():
                    self.longest = max(self.longest, age)

    def __enter__(self) -> IdleInTransaction:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def test_a_bad_a_slow_and_a_down_subscription_do_not_hold_the_good_one(db, dsn, tmp_path):
    good, down = Receiver(), Receiver()
    _, good.secret = webhooks.add(good.url, "cancelled", by="test")
    down_id, down.secret = webhooks.add(down.url, "cancelled", by="test")
    slow = SlowReceiver(every=3.0)
    slow_id, _ = webhooks.add(slow.url, "cancelled", by="test")
    bad_id = stored_unchecked(dsn, "http://127.0.0.1:99999/hook", ["cancelled"])
    good.start()
    svc = Service(db, tmp_path, "soak").start()
    jobs: list[int] = []
    cancelled_at: dict[int, float] = {}
    try:
        with IdleInTransaction(dsn) as idle:
            started = time.monotonic()
            for n in range(EVENTS):
                if n == OUTAGE_SECONDS:
                    down.start()                                  # back after 60 s
                job = queue.enqueue("deliver", f"SOAK-{n}", payloads.DELIVER,
                                    run_at=clock.now() + timedelta(days=1))
                queue.cancel(job.id)
                jobs.append(job.id)
                cancelled_at[job.id] = time.monotonic()
                time.sleep(max(0.0, started + n + 1 - time.monotonic()))   # the stream's pace
                if n == 20:   # fail early: the good one is served while the others fail
                    assert len({g["id"] for g in good.got}) >= 15, svc.log()
            wait_until(lambda: len({g["id"] for g in good.got}) >= EVENTS, 30, "the good one")
            wait_until(lambda: len({g["id"] for g in down.got}) >= EVENTS, 150,
                       "the one that was down, by itself")
            took = time.monotonic() - started
    finally:
        svc.stop()
        good.stop(), down.stop(), slow.stop()

    def firsts(r: Receiver) -> list[int]:
        seen: dict[str, int] = {}
        for g, e in zip(r.got, r.events(), strict=True):
            seen.setdefault(g["id"], e["data"]["id"])
        return list(seen.values())

    duplicates = {"good": len(good.got) - len(firsts(good)),
                  "down": len(down.got) - len(firsts(down))}
    latency = max(next(g["at"] for g, e in zip(good.got, good.events(), strict=True)
                       if e["data"]["id"] == j) - cancelled_at[j] for j in jobs)
    print(f"\nsoak: {EVENTS} events in {took:.0f} s; good: max latency {latency:.2f} s; "
          f"duplicates {duplicates}; failed attempts: down "
          f"{sum(a[0] is None for a in attempts(dsn, down_id))}, "
          f"slow {len(attempts(dsn, slow_id))} ({slow.requests} received), "
          f"bad {len(attempts(dsn, bad_id))}; longest idle in transaction "
          f"{idle.longest:.2f} s")
    assert firsts(good) == jobs and firsts(down) == jobs               # all, in order
    assert all(g["valid"] for g in good.got + down.got)
    assert latency < 3.0                          # never behind the slow or the bad one
    failed = [a for a in attempts(dsn, down_id) if a[0] != 204]
    assert 3 <= len(failed) <= 4                  # one try per backoff step while down
    slow_attempts = attempts(dsn, slow_id)
    assert slow_attempts and all(took_ms < 11_500 and "deadline" in error
                                 for _, error, took_ms in slow_attempts)
    assert attempts(dsn, bad_id)                  # tried, failed, logged, backed off
    assert all(r["paused_at"] is None for r in webhooks.subscriptions())   # none yet (15)
    assert idle.longest < 1.0
    assert "webhook round failed" not in svc.log()
