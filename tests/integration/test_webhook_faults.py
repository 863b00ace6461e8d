"""Webhook faults (issue 48) against real local endpoints: a subscription whose URL cannot
be sent to, a receiver that trickles its answer, an endpoint down for a while. One
subscription's trouble never holds another's deliveries; a failing endpoint backs off as a
whole (new events queue behind its backoff); one that keeps failing is paused with one mail,
then probed at the last backoff step and active again by itself when it answers; no
transaction is open while a delivery is on the network.

Time is portalq's frozen clock (backoff steps are advanced over, never slept through),
except where the attempt's own deadline is the subject: there it is the wall clock."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from portalq.jobs import clock, queue
from portalq.jobs.business import webhooks
from portalq.scheduler import webhook_sender as sender
from portalq.scheduler.config import Settings
from tests import payloads
from tests.webhook_receiver import SlowReceiver, stored_unchecked

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


def send(dsn: str, settings: Settings | None = None, **kw: Any) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            delivered = await sender.send_due(c, **kw)
            if settings is not None:
                await sender.tell_paused(settings, c)
            return delivered
    return asyncio.run(go())


def cancel_one(order: str) -> int:
    job = queue.enqueue("deliver", order, payloads.DELIVER)
    queue.cancel(job.id)
    return job.id


def attempts(dsn: str, subscription_id: int) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as c:
        return c.execute(
            "SELECT a.status_code, a.error, a.took_ms FROM portalq.webhook_attempts a "
            "JOIN portalq.webhook_deliveries d ON d.id = a.delivery_id "
            "WHERE d.subscription_id = %s ORDER BY a.id", (subscription_id,)).fetchall()


def row_of(subscription_id: int) -> dict[str, Any]:
    [row] = [r for r in webhooks.subscriptions() if r["id"] == subscription_id]
    return row


BAD_URLS = ("http://127.0.0.1:99999/hook", "http://127.0.0.1:abc/hook",
            "http://127.0.0.1:9/hook/café")


def test_a_subscription_that_cannot_be_sent_to_blocks_no_other_backs_off_and_is_paused(
        dsn, frozen, receiver, mailbox):
    """Issue 48 #1: URLs stored before they were checked (a port out of range, a port that
    is no number, a non-ASCII path) each fail their own attempt, logged; the good
    subscription gets every event all along; the bad ones back off, then are paused with
    one mail each."""
    settings = Settings(admin_emails="ops@example.com", smtp_url=mailbox.url)
    good, receiver.secret = webhooks.add(receiver.url, "cancelled", by="test")
    receiver.start()
    bad = [stored_unchecked(dsn, url, ["cancelled"]) for url in BAD_URLS]
    jobs = [cancel_one("ORD-1")]
    assert send(dsn, settings) == 1
    assert [e["data"]["id"] for e in receiver.events()] == jobs
    for sub in bad:
        [(status, error, _)] = attempts(dsn, sub)
        assert status is None and error, (sub, error)
        assert row_of(sub)["failures"] == 1
    frozen.advance(seconds=1)                      # within the first backoff step (5 s)
    jobs.append(cancel_one("ORD-2"))
    assert send(dsn, settings) == 1
    assert all(len(attempts(dsn, sub)) == 1 for sub in bad)   # backed off: not tried again
    for n in range(webhooks.PAUSE_AFTER + 2):
        frozen.advance(hours=5)
        jobs.append(cancel_one(f"ORD-{n + 3}"))
        send(dsn, settings)
    assert [e["data"]["id"] for e in receiver.events()] == jobs       # every one, in order
    assert all(g["valid"] for g in receiver.got)
    assert row_of(good)["failures"] == 0 and row_of(good)["paused_at"] is None
    for sub in bad:
        assert row_of(sub)["paused_at"] is not None
        assert row_of(sub)["undelivered"] == len(jobs)             # waiting, none dropped
    mails = mailbox.wait_for(len(bad), 30)
    assert sorted(m["Subject"] for m in mails) == sorted(
        f"[portalq] webhook {sub} paused: its endpoint keeps failing" for sub in bad)
    frozen.advance(hours=5)
    send(dsn, settings)
    assert len(mailbox.messages) == len(bad)                         # one mail each


def test_a_slow_receiver_is_cut_at_the_deadline_and_holds_no_transaction_nor_the_others(
        dsn, receiver):
    """Issue 48 #2: a receiver that answers a byte every 0.5 s is given up at the attempt's
    deadline (2 s here), not per read; the other subscription's delivery goes meanwhile;
    no session of the database sits idle in a transaction while the attempt is out."""
    slow = SlowReceiver(every=0.5)
    try:
        slow_id, _ = webhooks.add(slow.url, "cancelled", by="test")
        _, receiver.secret = webhooks.add(receiver.url, "cancelled", by="test")
        receiver.start()
        cancel_one("ORD-1")
        idle_in_txn: list[float] = []
        result: list[int] = []
        started = time.monotonic()
        t = threading.Thread(target=lambda: result.append(send(dsn, timeout=2.0)))
        t.start()
        with psycopg.connect(dsn, autocommit=True) as c:
            while t.is_alive():
                idle_in_txn += [r[0] for r in c.execute(
                    "SELECT extract(epoch FROM now() - state_change)::float FROM "
                    "pg_stat_activity WHERE datname = current_database() "
                    "AND state = 'idle in transaction'").fetchall()]
                t.join(0.1)   # the next sample, or at once when the sender is done
        t.join()
        took = time.monotonic() - started
    finally:
        slow.stop()
    assert result == [1] and slow.requests == 1
    assert receiver.got and receiver.got[0]["at"] - started < 1.5   # not behind the slow one
    [(status, error, took_ms)] = attempts(dsn, slow_id)
    assert status is None and "deadline" in error and 1900 <= took_ms < 3000
    assert took < 4.5
    assert max(idle_in_txn, default=0.0) < 0.5, idle_in_txn


def test_during_an_outage_new_events_queue_behind_the_backoff(dsn, frozen, receiver):
    """Issue 48 #18: an event every 2 s to an endpoint down for 30 s: one try per backoff
    step (at 0 s, 5 s -- then 35 s), not one per event; none paused; everything delivered,
    in order, at the next step after the endpoint is back."""
    sub, receiver.secret = webhooks.add(receiver.url, "cancelled", by="test")
    jobs = []
    for n in range(15):
        jobs.append(cancel_one(f"ORD-{n}"))
        send(dsn)
        frozen.advance(seconds=2)
    row = row_of(sub)
    assert row["paused_at"] is None and row["failures"] == 2, row
    assert len(attempts(dsn, sub)) == 2
    receiver.start()
    frozen.set(T0.replace(second=34))
    assert send(dsn) == 0                          # the next step is at 35 s
    frozen.set(T0.replace(second=36))
    assert send(dsn) == 15
    assert [e["data"]["id"] for e in receiver.events()] == jobs
    assert row_of(sub)["failures"] == 0


def test_a_paused_subscription_is_probed_and_active_again_by_itself(dsn, frozen, receiver,
                                                                   mailbox):
    settings = Settings(admin_emails="ops@example.com", smtp_url=mailbox.url)
    sub, receiver.secret = webhooks.add(receiver.url, "cancelled", by="test")
    jobs = [cancel_one("ORD-1"), cancel_one("ORD-2")]
    for _ in range(webhooks.PAUSE_AFTER):
        frozen.advance(hours=5)
        send(dsn, settings)
    assert row_of(sub)["paused_at"] is not None
    mailbox.wait_for(1, 30)
    receiver.start()                               # the endpoint is fixed; nobody resumes
    frozen.advance(hours=5)                        # past the last step (4 h): probed
    assert send(dsn, settings) == 2
    assert [e["data"]["id"] for e in receiver.events()] == jobs
    row = row_of(sub)
    assert row["paused_at"] is None and row["failures"] == 0
    assert len(mailbox.messages) == 1


def test_a_name_that_resolves_to_a_refused_address_is_not_sent_to(dsn, frozen, receiver):
    """Issue 48 #4: the private-address policy holds at each attempt for a host name (what
    it resolves to now): with ``none``, localhost is not POSTed to; the attempt fails."""
    url = receiver.url.replace("127.0.0.1", "localhost")
    sub, receiver.secret = webhooks.add(url, "cancelled", by="test")
    receiver.start()
    cancel_one("ORD-1")
    assert send(dsn, private="none") == 0
    [(status, error, _)] = attempts(dsn, sub)
    assert status is None and "private address" in error and not receiver.got
    frozen.advance(seconds=6)
    assert send(dsn, private="loopback") == 1 and len(receiver.got) == 1


def test_a_stopping_sender_takes_its_drains_with_it(dsn):
    """The service's webhook loop cancelled (a stop) while an attempt is out: the drain
    task goes with it, before the pool closes; its lease stays until it expires."""
    from portalq.scheduler.worker import make_pool

    slow = SlowReceiver(every=0.5)
    settings = Settings(tick_seconds=0.2)
    try:
        sub, _ = webhooks.add(slow.url, "cancelled", by="test")
        cancel_one("ORD-1")

        async def go() -> list[str]:
            pool = make_pool(settings, dsn)
            await pool.open(wait=True, timeout=30)
            try:
                loop = asyncio.create_task(sender.Sender(settings, pool, lambda: True).loop())
                while slow.requests == 0:
                    await asyncio.sleep(0.05)
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
                return [t.get_name() for t in asyncio.all_tasks()
                        if t.get_name().startswith("webhook-")]
            finally:
                await pool.close()
        assert asyncio.run(go()) == []
    finally:
        slow.stop()
    assert row_of(sub)["failures"] == 0 and attempts(dsn, sub) == []   # sent again later
