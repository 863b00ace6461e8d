"""The webhook sender (issue 36): the leader POSTs due deliveries (:mod:`jobs.business.webhooks`).

Each subscription is drained on its own (issue 48): a subscription whose endpoint is slow,
down or cannot even be addressed fails its own attempts and no other's. An attempt is three
steps: a short transaction leases the subscription's oldest waiting delivery (``busy_until``)
and commits; the POST runs outside any transaction, under one deadline for the whole of it
(``PORTALQ_WEBHOOK_TIMEOUT_SECONDS``: a receiver that trickles its answer a byte at a time
is cut there); a second short transaction logs it, marks the delivery delivered (a 2xx) or
holds the whole subscription back for its backoff step, and ends the lease. Two nodes never
send one attempt; a node that dies mid-POST leaves its lease to expire and the delivery is
sent again (the receiver may then see its ``webhook-id`` twice: at least once, by design --
it deduplicates on that id). A subscription paused for its failures is told to the admins
once, and still probed at the last backoff step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from portalq.jobs import clock
from portalq.jobs.business import webhooks
from portalq.jobs.db import connections
from portalq.scheduler.config import Settings

log = logging.getLogger("portalq.webhooks")

TIMEOUT_SECONDS = 10.0
#: attempts per subscription in one drain (then the loop looks again, and at the others)
ROUND = 50
#: a lease outlives the attempt's deadline by this much (the log written after it)
LEASE_MARGIN = timedelta(seconds=30)

#: a transaction on some connection: ``async with tx() as conn``
Tx = Callable[[], contextlib.AbstractAsyncContextManager[Any]]


async def _address(host: str, port: int, private: str) -> str:
    """The address to connect to: the host's first, if the private-address policy allows
    it (resolved here and connected to as resolved: a name that resolves to the private
    network now is refused, whatever it resolved to at ``webhooks add``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                         type=socket.SOCK_STREAM)
    address = str(infos[0][4][0])
    if webhooks.address_refused(address, private):
        raise ConnectionRefusedError(f"{host} is a private address ({address}); "
                                     f"PORTALQ_WEBHOOK_PRIVATE_ADDRESSES={private}")
    return address


async def _post(url: str, body: bytes, headers: Mapping[str, str], private: str) -> int:
    """One HTTP/1.1 POST; the answer's status code (only its status line is read)."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    address = await _address(host, port, private)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}",
            f"Content-Length: {len(body)}", "Connection: close",
            "User-Agent: portalq-webhooks", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body
    reader, writer = await asyncio.open_connection(
        address, port, ssl=ssl.create_default_context() if https else None,
        server_hostname=host if https else None)
    try:
        writer.write(request)
        await writer.drain()
        status_line = await reader.readline()
    finally:
        writer.close()
    fields = status_line.split(None, 2)
    if len(fields) < 2 or not fields[0].startswith(b"HTTP/") or not fields[1].isdigit():
        raise ConnectionError(f"not an HTTP answer: {status_line[:60]!r}")
    return int(fields[1])


async def post(url: str, body: bytes, headers: Mapping[str, str], *,
               timeout: float = TIMEOUT_SECONDS,
               private: str = "loopback") -> tuple[int | None, str | None]:
    """POST ``body``; (status code, None), (status code, "HTTP nnn") or (None, why not).
    Never raises: whatever is wrong with this URL or its endpoint is this attempt's failure
    and no one else's. No redirect is followed: a signed delivery goes to the URL
    subscribed, or fails."""
    try:
        async with asyncio.timeout(timeout):
            status = await _post(url, body, headers, private)
    except TimeoutError:
        return None, f"no answer within the {timeout:g} s deadline"
    except Exception as exc:  # noqa: BLE001 - a bad URL or endpoint fails its own attempt
        return None, f"{type(exc).__name__}: {exc}"[:300]
    return status, None if 200 <= status < 300 else f"HTTP {status}"


async def _signed(conn: Any, d: Mapping[str, Any]) -> tuple[bytes, dict[str, str] | str]:
    """The delivery's body and headers, or why it cannot be signed (its secret's key gone)."""
    body = await webhooks.body_of(conn, d)
    timestamp = int(clock.now().timestamp())
    try:
        signature = webhooks.sign(webhooks.secret_of(d), d["msg_id"], timestamp, body)
    except Exception as exc:  # noqa: BLE001 - this subscription's fault, logged as its attempt
        return body, f"not signed: {type(exc).__name__}"
    return body, {"content-type": "application/json", "webhook-id": d["msg_id"],
                  "webhook-timestamp": str(timestamp), "webhook-signature": signature}


async def drain(tx: Tx, subscription_id: int, *, timeout: float = TIMEOUT_SECONDS,
                private: str = "loopback", limit: int = ROUND,
                go_on: Callable[[], bool] = lambda: True) -> int:
    """Send a subscription's waiting deliveries oldest first, until one fails (then it is
    held back for its backoff), none is left, or ``limit``; how many were delivered."""
    delivered = 0
    for _ in range(limit):
        if not go_on():
            break
        async with tx() as conn:
            d = await webhooks.lease(conn, subscription_id,
                                     hold=timedelta(seconds=timeout) + LEASE_MARGIN)
            if d is None:
                break
            body, headers = await _signed(conn, d)
        started = time.monotonic()
        status: int | None
        error: str | None
        if isinstance(headers, str):
            status, error = None, headers
        else:
            status, error = await post(d["url"], body, headers, timeout=timeout,
                                       private=private)
        took_ms = int((time.monotonic() - started) * 1000)
        async with tx() as conn:
            failures = await webhooks.attempted(conn, d, body=body, status_code=status,
                                                error=error, took_ms=took_ms)
        if error is not None:
            log.warning("webhook %s to subscription %s not delivered (%s); %d failure(s) "
                        "in a row", d["msg_id"], subscription_id, error, failures)
            break
        delivered += 1
    return delivered


async def send_due(conn: Any, *, limit: int = ROUND, timeout: float = TIMEOUT_SECONDS,
                   private: str = "loopback") -> int:
    """One round on one connection: every due subscription drained at once, each attempt's
    transactions taking the connection in turn (never across the POST); how many were
    delivered."""
    lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def tx() -> AsyncIterator[Any]:
        async with lock, conn.transaction():
            yield conn

    async with lock:
        due = await webhooks.due_subscriptions(conn)
    counts = await asyncio.gather(*(drain(tx, s, timeout=timeout, private=private, limit=limit)
                                    for s in due))
    return sum(counts)


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
                f"Webhook subscription {sub['id']} ({webhooks.shown_url(sub['url'])}; events "
                f"{', '.join(sub['events'])}) was paused: {sub['pause_reason']}\n\n"
                "Its deliveries wait (none is dropped); the endpoint is still tried at the "
                "last backoff step, and the subscription is active again as soon as it "
                "answers. To send at once when the endpoint is fixed:\n\n"
                f"  portalq webhooks log {sub['id']}\n  portalq webhooks resume {sub['id']}\n")
            from portalq.scheduler import mailer  # the leader's, when a pause is told

            await mailer.send(settings, msg)
            await webhooks.pause_told(conn, sub["id"])
            told += 1
    return told


class Sender:
    """The leader's webhook loop: woken when deliveries are written (NOTIFY
    ``portalq_outbox``), when the next one falls due and when a drain ends; each due
    subscription is drained by a task of its own (other nodes only wait)."""

    def __init__(self, settings: Settings, pool: Any, is_leader: Any) -> None:
        self.settings, self.pool, self.is_leader = settings, pool, is_leader
        self._kick = asyncio.Event()
        self._pruned_at: float | None = None
        self._draining: dict[int, asyncio.Task[int]] = {}

    def kick(self) -> None:
        self._kick.set()

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[Any]:
        async with self.pool.connection() as conn, conn.transaction():
            yield conn

    async def _drain(self, subscription_id: int) -> int:
        try:
            return await drain(self._tx, subscription_id,
                               timeout=self.settings.webhook_timeout_seconds,
                               private=self.settings.webhook_private_addresses,
                               go_on=lambda: bool(self.is_leader()))
        except connections.LOST as exc:
            log.warning("webhooks not sent now (%s); trying again", exc)
        except Exception as exc:  # noqa: BLE001 - the lease expires; tried again
            log.error("webhook subscription %s: %s: %s", subscription_id,
                      type(exc).__name__, exc)
        finally:
            del self._draining[subscription_id]
            self.kick()   # the next one due, and a pause to tell, looked at now
        return 0

    async def loop(self) -> None:
        try:
            await self._loop()
        finally:   # the service stops: the drains with it, before its pool closes (an
            # attempt cut here keeps its lease until it expires, then is sent again)
            drains = list(self._draining.values())
            for task in drains:
                task.cancel()
            await asyncio.gather(*drains, return_exceptions=True)

    async def _loop(self) -> None:
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
                    for sub in await webhooks.due_subscriptions(conn):
                        if sub not in self._draining:
                            self._draining[sub] = asyncio.create_task(
                                self._drain(sub), name=f"webhook-{sub}")
                    await tell_paused(self.settings, conn)
                    if self._pruned_at is None or time.monotonic() - self._pruned_at > 3600:
                        await webhooks.prune(conn)   # hourly: the delivery log is kept KEEP
                        self._pruned_at = time.monotonic()
                    at = await webhooks.next_try(conn)
                if at is not None and at > clock.now():   # (the due ones: draining now)
                    timeout = min(max((at - clock.now()).total_seconds(), 0.05), timeout)
            except connections.LOST as exc:
                log.warning("webhooks not sent now (%s); trying again", exc)
            except Exception as exc:  # noqa: BLE001 - the loop must survive; tried again
                log.error("webhook round failed: %s: %s", type(exc).__name__, exc)
