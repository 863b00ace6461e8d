"""Webhooks (issue 36) against a real local HTTP receiver that checks each delivery's
Standard Webhooks signature on its own (the HMAC is recomputed here, not with portalq's
code): every event delivered and validly signed; an endpoint down for 30 s, then failing
once, gets everything after, under the same id and body; a tampered or replayed delivery
fails the receiver's check; an endpoint that keeps failing is paused, the admins told once.

Time is portalq's frozen clock: the sender runs its rounds (``send_due``) as the leader's
loop would, and the backoff is stepped over by advancing the clock, never by sleeping."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from portalq.jobs import clock, queue, worker_api
from portalq.jobs.audit import Actor
from portalq.jobs.business import webhooks
from portalq.jobs.operations import approvals, questions
from portalq.jobs.worker_api import Capacity
from portalq.scheduler import webhook_sender as sender
from portalq.scheduler.config import Settings
from tests import event_kinds, payloads
from tests.mailbox import Mailbox
from tests.ports import free_port
from tests.webhook_receiver import Receiver, signature_ok

T0 = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
SSN = payloads.OBTAIN_EIN["responsible_party"]["ssn"]


@pytest.fixture
def frozen() -> clock.FrozenClock:
    c = clock.FrozenClock(T0)
    clock.set_clock(c)
    return c


def send(dsn: str, settings: Settings | None = None) -> int:
    async def go() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            delivered = await sender.send_due(c)
            if settings is not None:
                await sender.tell_paused(settings, c)
            return delivered
    return asyncio.run(go())


def complete(dsn: str, orders: list[str]) -> list[int]:
    jobs = [queue.enqueue("deliver", o, payloads.DELIVER).id for o in orders]

    async def go() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            claimed = await worker_api.claim(c, worker="w1", limit=50,
                                             capacities=[Capacity("email", None)])
            assert {j["id"] for j in claimed} == set(jobs)
            await worker_api.complete_many(c, worker="w1",
                                           results=[(i, {"sent": True}) for i in jobs])
    asyncio.run(go())
    return jobs


def test_every_event_is_delivered_signed_and_without_secrets(dsn, frozen, receiver):
    sub, secret = webhooks.add(receiver.url, "completed,failed,cancelled,waiting_for_person",
                               by="test")
    only_failed = Receiver()
    _, other_secret = webhooks.add(only_failed.url, ["failed"], by="test")
    receiver.secret, only_failed.secret = secret, other_secret
    receiver.start(), only_failed.start()
    try:
        [done] = complete(dsn, ["ORD-1"])
        waiting = queue.enqueue("deliver", "ORD-2", payloads.DELIVER)
        cancelled = queue.enqueue("deliver", "ORD-3", payloads.DELIVER)
        ein = queue.enqueue("obtain_ein", "ORD-4", payloads.OBTAIN_EIN)
        queue.cancel(cancelled.id)

        async def go() -> None:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
                claimed = {j["id"]: j for j in await worker_api.claim(
                    c, worker="w1", limit=10,
                    capacities=[Capacity("email", None), Capacity("irs_ein", None)])}
                await questions.ask(c, job_id=waiting.id, attempt=1, question="the code?",
                                    deadline=clock.now())
                await worker_api.finish_unsuccessful(c, job=claimed[ein.id], worker="w1",
                                                     status="failed",
                                                     error=f"the IRS refused {SSN}")
        asyncio.run(go())
        assert send(dsn) == 5
    finally:
        only_failed.stop()
    assert all(g["valid"] for g in receiver.got + only_failed.got)
    assert len({g["id"] for g in receiver.got}) == 4
    got = {e["data"]["id"]: (e["type"], e["data"]["order_id"], e["data"]["status"])
           for e in receiver.events()}
    assert got == {done: ("job.completed", "ORD-1", "completed"),
                   cancelled.id: ("job.cancelled", "ORD-3", "cancelled"),
                   waiting.id: ("job.waiting_for_person", "ORD-2", "waiting_for_person"),
                   ein.id: ("job.failed", "ORD-4", "failed")}
    [failed] = only_failed.events()
    assert failed["data"]["id"] == ein.id and failed["data"]["last_error"] == "the IRS refused ***"
    assert failed["data"]["payload"]["responsible_party"]["ssn"] != SSN
    assert all("6789" not in g["body"].decode() for g in receiver.got + only_failed.got)
    assert [e["data"]["result"] for e in receiver.events() if e["data"]["id"] == done] == [
        {"sent": True}]
    assert send(dsn) == 0                        # delivered once: nothing is due again


def test_waiting_on_the_portal_and_decided_are_delivered_once_signed(dsn, frozen, receiver):
    """A job that begins waiting on its portal (its re-check: nothing more), an approval
    approved and one rejected, an uncertain filing resolved filed and one not filed: each
    one delivery, validly signed, saying what was decided. A subscriber to "cancelled"
    only gets the rejected job's cancellation, not the decision."""
    _, receiver.secret = webhooks.add(receiver.url, "waiting_on_portal,decided", by="test")
    cancels = Receiver()
    _, cancels.secret = webhooks.add(cancels.url, ["cancelled"], by="test")
    receiver.start(), cancels.start()
    try:
        w = queue.enqueue("deliver", "ORD-W", payloads.DELIVER)
        first = event_kinds.check_portal(dsn, w.id)
        frozen.set(datetime.fromisoformat(first["next_check"]))
        event_kinds.check_portal(dsn, w.id)          # a re-check: no delivery
        ok, no, filed, not_filed = (queue.enqueue("deliver", f"ORD-{o}", payloads.DELIVER)
                                    for o in ("OK", "NO", "FILED", "NOT"))
        for job in (ok, no):
            event_kinds.awaiting_approval(dsn, job.id)
        for job in (filed, not_filed):
            event_kinds.failed_in_doubt(dsn, job.id)
        admin = Actor("ada", "admin", "cli")
        with psycopg.connect(dsn) as c:
            approvals.decide(c, admin, ok.id, "approved", "the review page is right")
            approvals.decide(c, admin, no.id, "rejected", "wrong director")
            c.commit()
        queue.resolve_filed(filed.id, "BC1234567", actor="ada")
        queue.resolve_not_filed(not_filed.id, actor="ada")
        assert send(dsn) == 6
    finally:
        cancels.stop()
    assert all(g["valid"] for g in receiver.got + cancels.got)
    got = sorted((e["data"]["order_id"], e["type"], e["data"].get("decision"))
                 for e in receiver.events())
    assert got == [("ORD-FILED", "job.decided", "filed"), ("ORD-NO", "job.decided", "rejected"),
                   ("ORD-NOT", "job.decided", "not_filed"),
                   ("ORD-OK", "job.decided", "approved"),
                   ("ORD-W", "job.waiting_on_portal", None)]
    assert [(e["type"], e["data"]["order_id"]) for e in cancels.events()] == [
        ("job.cancelled", "ORD-NO")]
    assert send(dsn) == 0


def test_an_endpoint_down_for_30s_gets_everything_after_under_the_same_ids(
        dsn, frozen, receiver):
    sub, receiver.secret = webhooks.add(receiver.url, "completed", by="test")
    jobs = complete(dsn, ["A", "B", "C"])       # the receiver is down: nothing listens
    assert send(dsn) == 0                       # one attempt refused, the others held back
    for _ in range(6):                          # 30 s of an endpoint that is down
        frozen.advance(seconds=5)
        send(dsn)
    log = webhooks.log(sub)
    assert all(r["delivered_at"] is None for r in log) and len(log) == 3
    refused = [r for r in log if r["attempts"] > 0]
    assert refused and all("ConnectionRefusedError" in r["last_error"] for r in refused)
    assert sum(r["attempts"] for r in log) < 6  # tried once per backoff step, not per event
    ids = {r["msg_id"] for r in log}

    receiver.fail_first = True                  # back, but failing each first time
    receiver.start()
    frozen.advance(minutes=15)
    send(dsn)                                   # one 503, the others held back again
    for _ in range(4):
        frozen.advance(minutes=15)
        send(dsn)
    assert all(r["delivered_at"] is not None for r in webhooks.log(sub))
    assert {g["id"] for g in receiver.got} == ids            # same ids as before, none lost
    assert sorted(e["data"]["id"] for e in receiver.events()) == sorted(jobs * 2)
    for msg_id in ids:                                       # a 503, then the same again
        first, again = (g for g in receiver.got if g["id"] == msg_id)
        assert first["body"] == again["body"] and first["ts"] != again["ts"]
    assert all(g["valid"] for g in receiver.got)


def test_a_tampered_or_replayed_delivery_fails_the_receivers_check(dsn, frozen, receiver):
    _, receiver.secret = webhooks.add(receiver.url, "completed", by="test")
    receiver.start()
    complete(dsn, ["ORD-1"])
    assert send(dsn) == 1
    [g] = receiver.got
    headers, body = g["headers"], g["body"]
    assert signature_ok(receiver.secret, headers, body, clock.now())
    tampered = body.replace(b'"sent":true', b'"sent":false')
    assert tampered != body
    assert not signature_ok(receiver.secret, headers, tampered, clock.now())
    assert not signature_ok(receiver.secret, headers, body, clock.now() + timedelta(minutes=10))
    assert not signature_ok("whsec_" + base64.b64encode(b"x" * 32).decode(), headers, body,
                            clock.now())
    # portalq's own helper for receivers agrees
    assert webhooks.verify(receiver.secret, headers, body, now=clock.now())
    assert not webhooks.verify(receiver.secret, headers, tampered, now=clock.now())


def test_an_endpoint_that_keeps_failing_is_paused_and_admins_told_once(dsn, frozen, receiver):
    mailbox = Mailbox().start()
    settings = Settings(admin_emails="ops@example.com", smtp_url=mailbox.url)
    try:
        sub, receiver.secret = webhooks.add(receiver.url, "completed", by="test")
        complete(dsn, ["ORD-1", "ORD-2"])
        for _ in range(webhooks.PAUSE_AFTER):       # down all along
            frozen.advance(hours=5)
            send(dsn, settings)
        [row] = webhooks.subscriptions()
        assert row["paused_at"] is not None and row["failures"] == webhooks.PAUSE_AFTER
        assert row["undelivered"] == 2             # waiting, not dropped
        [mail] = mailbox.wait_for(1, 30)
        assert f"webhook {sub} paused" in mail["Subject"]
        for _ in range(3):                          # still down: probed, still paused
            frozen.advance(hours=5)
            assert send(dsn, settings) == 0
        [row] = webhooks.subscriptions()
        assert row["paused_at"] is not None and row["failures"] == webhooks.PAUSE_AFTER + 3
        receiver.start()
        frozen.advance(minutes=1)
        assert send(dsn, settings) == 0            # paused: its next probe is hours away
        webhooks.resume(sub)                       # a person who fixed it: at once
        assert send(dsn, settings) == 2
        assert len(mailbox.messages) == 1          # told once
    finally:
        mailbox.stop()


def test_a_subscriptions_secret_follows_key_rotation_and_retirement(dsn, frozen, receiver,
                                                                     tmp_path):
    from portalq.jobs.db import txn
    from portalq.jobs.secrets import crypto
    from portalq.jobs.secrets import rotation as keys

    ring = crypto.FileKeyring(tmp_path / "keys.json", create=True)
    crypto.set_provider(ring)
    try:
        old = ring.current_id()
        _, receiver.secret = webhooks.add(receiver.url, "completed", by="test")
        with txn.connect() as c:
            assert keys.usage(c) == {old: 1}
        ring.add_current()
        report = keys.retire(txn.connect, old, ring, only_recorded=True)
        assert report.webhook_secrets == 1 and ring.key_ids() == [ring.current_id()]
        receiver.start()
        complete(dsn, ["ORD-1"])
        assert send(dsn) == 1 and receiver.got[0]["valid"]   # still signs with its secret
    finally:
        crypto.set_provider(None)


def test_the_running_service_delivers_at_once_not_at_the_next_tick(db, dsn, tmp_path, receiver):
    from tests.service_helpers import Service, add_local_portal, health, wait_until

    add_local_portal(dsn)
    _, receiver.secret = webhooks.add(receiver.url, "completed,failed", by="test")
    receiver.start()
    port = free_port()
    svc = Service(db, tmp_path, "hooks", PORTALQ_TICK_SECONDS=60,
                  PORTALQ_METRICS_PORT=port).start()
    try:
        wait_until(lambda: health(port)["last_tick"] is not None, 30, "the first tick")
        ok = queue.enqueue("ledger_job", "ORD-OK", {})
        bad = queue.enqueue("ledger_job", "ORD-BAD", {"permanent": True})
        # the next tick is 60 s away: only the NOTIFY of the deliveries can send them in 30
        wait_until(lambda: len(receiver.got) >= 2, 30, "both deliveries")
    finally:
        svc.stop()
    assert all(g["valid"] for g in receiver.got)
    assert sorted((e["data"]["order_id"], e["type"]) for e in receiver.events()) == [
        ("ORD-BAD", "job.failed"), ("ORD-OK", "job.completed")]
    assert {e["data"]["id"] for e in receiver.events()} == {ok.id, bad.id}


def test_delivered_deliveries_are_pruned_after_their_keeping_time_waiting_ones_kept(
        dsn, frozen, receiver):
    sub, receiver.secret = webhooks.add(receiver.url, "completed", by="test")
    receiver.start()
    complete(dsn, ["ORD-1"])
    assert send(dsn) == 1
    receiver.stop()
    complete(dsn, ["ORD-2"])
    assert send(dsn) == 0                       # refused: waits

    async def prune() -> int:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
            return await webhooks.prune(c, batch=1)
    frozen.advance(days=29)
    assert asyncio.run(prune()) == 0
    frozen.advance(days=2)
    assert asyncio.run(prune()) == 1
    assert [r["delivered_at"] for r in webhooks.log(sub)] == [None]
