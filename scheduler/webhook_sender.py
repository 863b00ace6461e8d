"""The webhook sender (issue 36): the leader POSTs due deliveries (:mod:`jobs.business.webhooks`).

One transaction per attempt, as the mail outbox does: the delivery is locked while it is
sent, then logged, and marked delivered (a 2xx) or due again after its backoff, all in that
transaction. Two nodes never send one attempt; a node that dies mid-POST leaves the delivery
due (the receiver may then see its ``webhook-id`` twice: at least once, by design -- it
deduplicates on that id). A failed attempt also holds back the subscription's other waiting
deliveries to the same time (an endpoint that is down is tried once per backoff step, not
once per waiting event). A subscription paused for its failures is told to the admins once.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import logging
import time
from collections.abc import Mapping
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from portalq.jobs import clock
from portalq.jobs.business import webhooks
from portalq.jobs.db import connections
from portalq.scheduler import mailer
from portalq.scheduler.config import Settings

log = logging.getLogger("portalq.webhooks")

TIMEOUT_SECONDS = 10
ROUND = 50


def post(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int | None, str | None]:
    """POST ``body``; (status code, None) or (None, why not). No redirect is followed: a
    signed delivery goes to the URL subscribed, or fails."""
    parts = urlsplit(url)
    conn_type = (http.client.HTTPSConnection if parts.scheme == "https"
                 else http.client.HTTPConnection)
    conn = conn_type(parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", target, body=body, headers=dict(headers))
        response = conn.getresponse()
        response.read(65536)
        error = None if 200 <= response.status < 300 else f"HTTP {response.status}"
        return response.status, error
    except (OSError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]
    finally:
        conn.close()


async def send_due(conn: Any, *, limit: int = ROUND) -> int:
    """Send the due deliveries (at most ``limit`` attempts); how many were delivered."""
    delivered = 0
    done: list[int] = []
    for _ in range(limit):
        async with conn.transaction():
            d = await webhooks.next_due(conn, skip=done)
            if d is None:
                break
            done.append(d["id"])
            body = await webhooks.body_of(conn, d)
            timestamp = int(clock.now().timestamp())
            headers = {"content-type": "application/json", "webhook-id": d["msg_id"],
                       "webhook-timestamp": str(timestamp),
                       "webhook-signature": webhooks.sign(webhooks.secret_of(d), d["msg_id"],
                                                          timestamp, body)}
            started = time.monotonic()
            status, error = await asyncio.to_thread(post, d["url"], body, headers)
            took_ms = int((time.monotonic() - started) * 1000)
            failures = await webhooks.attempted(conn, d, body=body, status_code=status,
                                                error=error, took_ms=took_ms)
            if error is None:
                delivered += 1
            else:
                log.warning("webhook %s to subscription %s not delivered (%s); %d failure(s) "
                            "in a row", d["msg_id"], d["subscription_id"], error, failures)
    return delivered


async def tell_paused(settings: Settings, conn: Any) -> int:
    """Mail the admins once of each subscription paused for its failures."""
    told = 0
    while settings.admins():
        async with conn.transaction():
            sub = await webhooks.paused_untold(conn)
            if sub is None:
                break
            msg = EmailMessage()
            msg["Subject"] = f"[portalq] webhook {sub['id']} paused: its endpoint keeps failing"
            msg["To"] = ", ".join(settings.admins())
            msg.set_content(
                f"Webhook subscription {sub['id']} ({sub['url']}; events "
                f"{', '.join(sub['events'])}) was paused: {sub['pause_reason']}\n\n"
                "Its deliveries wait (none is dropped). When the endpoint is fixed:\n\n"
                f"  portalq webhooks log {sub['id']}\n  portalq webhooks resume {sub['id']}\n")
            await mailer.send(settings, msg)
            await webhooks.pause_told(conn, sub["id"])
            told += 1
    return told


class Sender:
    """The leader's webhook loop: woken when deliveries are written (NOTIFY
    ``portalq_outbox``) and when the next one falls due; other nodes only wait."""

    def __init__(self, settings: Settings, pool: Any, is_leader: Any) -> None:
        self.settings, self.pool, self.is_leader = settings, pool, is_leader
        self._kick = asyncio.Event()
        self._pruned_at: float | None = None

    def kick(self) -> None:
        self._kick.set()

    async def loop(self) -> None:
        timeout: float | None = self.settings.tick_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._kick.wait()
            self._kick.clear()
            timeout = self.settings.tick_seconds   # a new leader looks at least this often
            if not self.is_leader():
                continue
            try:
                async with self.pool.connection() as conn:
                    await send_due(conn)
                    await tell_paused(self.settings, conn)
                    if self._pruned_at is None or time.monotonic() - self._pruned_at > 3600:
                        await webhooks.prune(conn)   # hourly: the delivery log is kept KEEP
                        self._pruned_at = time.monotonic()
                    at = await webhooks.next_try(conn)
                if at is not None:
                    timeout = min(max((at - clock.now()).total_seconds(), 0.05), timeout)
            except connections.LOST as exc:
                log.warning("webhooks not sent now (%s); trying again", exc)
            except Exception as exc:  # noqa: BLE001 - the loop must survive; tried again
                log.error("webhook round failed: %s: %s", type(exc).__name__, exc)
