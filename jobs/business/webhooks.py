"""Webhooks (issue 36): the business's endpoints told of its jobs' results, the Standard
Webhooks way (https://www.standardwebhooks.com).

A subscription names an URL, the event kinds it wants (:data:`EVENTS`) and gets a signing
secret ``whsec_<base64>`` of its own (shown once, at ``portalq webhooks add``; sealed at
rest). The deliveries are written by a trigger in the transaction that decided the job
(migration 0022), so an event exists iff its job's change committed; the
leader sends them (:mod:`scheduler.webhook_sender`). Every attempt of a delivery carries the same
``webhook-id`` and body; ``webhook-signature`` is ``v1,<base64 HMAC-SHA256>`` of
``"<id>.<timestamp>.<body>"`` under the secret's bytes.

The body holds the job as :func:`jobs.secrets.redaction.public_job` shows it: no secret
payload field
(masked), and the job's secret values and anything shaped like an SSN scrubbed from every
other text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from psycopg import AsyncConnection

from portalq.jobs import clock, limits, settings
from portalq.jobs.db import sql
from portalq.jobs.db.txn import use
from portalq.jobs.errors import InputError, JobNotFound
from portalq.jobs.secrets import crypto, redaction

AConn = AsyncConnection[Any]

#: the event kinds a subscription may want (a job's status, as ``portalq_job_status`` says)
EVENTS = ("completed", "failed", "cancelled", "waiting_for_person", "waiting_on_portal",
          "decided")
#: what a person decided, in a ``decided`` event (migration 0023)
DECISIONS = ("approved", "rejected", "filed", "not_filed")
SECRET_PREFIX = "whsec_"
#: PORTALQ_WEBHOOK_PRIVATE_ADDRESSES: which private addresses a webhook URL may name
PRIVATE_POLICIES = ("loopback", "none", "all")
#: a subscription whose attempts failed this many times running is paused (admins told once)
PAUSE_AFTER = 15
#: the wait after the n-th failed attempt (then the last one, again and again)
BACKOFF = (timedelta(seconds=5), timedelta(seconds=30), timedelta(minutes=2),
           timedelta(minutes=10), timedelta(minutes=30), timedelta(hours=1),
           timedelta(hours=2), timedelta(hours=4))
#: how long a delivered delivery (and its attempts) is kept, for ``portalq webhooks log``
KEEP = timedelta(days=30)
#: what a job shows of itself in a delivery (public_job's view: masked, scrubbed)
JOB_FIELDS = ("id", "job_type", "order_id", "portal", "status", "attempts", "result",
              "last_error", "payload", "created_at", "finished_at")


# -- subscriptions (the CLI) ----------------------------------------------------------------
def _aad(subscription_url: str) -> bytes:
    return b"portalq-webhook-secret:" + subscription_url.encode()


def _port(netloc: str) -> str:
    """The port as written in ``host:port`` (``[v6]:port``), '' if none."""
    hostport = netloc.rpartition("@")[2]
    return hostport.rpartition("]")[2].partition(":")[2]


def address_refused(address: str, policy: str) -> bool:
    """Whether ``PORTALQ_WEBHOOK_PRIVATE_ADDRESSES`` (:data:`PRIVATE_POLICIES`) refuses an IP
    address: a webhook is the business's app on the internet, or on this host; a URL that
    names the private network or a cloud's metadata address (169.254.169.254, link-local)
    would let whoever adds subscriptions make the leader POST into it."""
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if policy == "all":
        return False
    if ip.is_loopback:
        return policy == "none"
    return (ip.is_private or ip.is_link_local or ip.is_reserved or ip.is_multicast
            or ip.is_unspecified)


def private_policy() -> str:
    policy: str = settings.current(settings.WebhookSettings).webhook_private_addresses
    return policy


def check_url(url: str, *, private: str | None = None) -> str:
    """A URL the sender can and may send to, or :class:`InputError`: refused here once
    rather than failing every attempt (issue 48: a port out of range, a port that is no
    number, a non-ASCII path), and never with credentials in it (they would be stored and
    shown in clear; the signature authenticates each delivery). The errors never echo it."""
    url = limits.check_identifier(url, "webhook URL", 2000)
    if any(not 33 <= ord(ch) <= 126 for ch in url):
        raise InputError("a webhook URL is ASCII without spaces: percent-encode the rest "
                         "(a path /café is /caf%C3%A9)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("a webhook URL is http(s)://host/...")
    if "@" in parts.netloc:
        raise InputError("a webhook URL carries no user or password (it would be stored and "
                         "shown in clear): the signature authenticates each delivery")
    if parts.query or "?" in url:
        raise InputError("a webhook URL has no query string (a token there would be stored "
                         "and shown in clear): the signature authenticates each delivery")
    port = _port(parts.netloc)
    if port and not port.isdigit():
        raise InputError(f"a webhook URL's port {port!r} is not a number")
    if port and not 1 <= int(port) <= 65535:
        raise InputError(f"a webhook URL's port {int(port)} is not in 1-65535")
    policy = private_policy() if private is None else private
    host = "127.0.0.1" if parts.hostname == "localhost" else parts.hostname
    try:
        refused = address_refused(host, policy)
    except ValueError:
        refused = False              # a name: its addresses are checked at each attempt
    if refused:
        raise InputError(f"a webhook URL names a private address ({parts.hostname}); "
                         f"PORTALQ_WEBHOOK_PRIVATE_ADDRESSES={policy} refuses it")
    return url


def shown_url(url: str) -> str:
    """A URL as it may be shown: a password or query values stored before they were
    refused (issue 48) masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = "&".join(f"{q.partition('=')[0]}=***" for q in parts.query.split("&")
                     ) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def check_events(events: str | Iterable[str]) -> list[str]:
    wanted = [e.strip() for e in (events.split(",") if isinstance(events, str) else events)]
    if not wanted or any(not e for e in wanted):
        raise InputError(f"events: a comma-separated list of {', '.join(EVENTS)}")
    unknown = [e for e in wanted if e not in EVENTS]
    if unknown:
        raise InputError(f"unknown event {unknown[0]!r} (known: {', '.join(EVENTS)})")
    return sorted(set(wanted), key=EVENTS.index)


def add(url: str, events: str | Iterable[str], *, by: str, conn: Any = None) -> tuple[int, str]:
    """A new subscription: (its id, its signing secret -- shown this once)."""
    url, wanted = check_url(url), check_events(events)
    secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
    key_id, sealed = crypto.seal_blob(secret.encode(), aad=_aad(url))
    with use(conn) as c:
        row = sql.fetch_one(c, "webhook_add", {"url": url, "events": wanted, "key_id": key_id,
                                               "secret": sealed, "now": clock.now(), "by": by})
    assert row is not None
    return int(row["id"]), secret


def subscriptions(conn: Any = None) -> list[dict[str, Any]]:
    """The subscriptions as they may be shown (:func:`shown_url`; never their secrets)."""
    with use(conn) as c:
        rows = sql.fetch(c, "webhook_list")
    return [{**r, "url": shown_url(r["url"])} for r in rows]


def _id(subscription_id: Any) -> int:
    checked: int = limits.check_job_id(subscription_id)
    return checked


def remove(subscription_id: int, conn: Any = None) -> None:
    """Drop a subscription with its waiting deliveries and their log."""
    with use(conn) as c:
        if sql.fetch_one(c, "webhook_remove", {"id": _id(subscription_id)}) is None:
            raise JobNotFound(f"no webhook subscription {subscription_id}")


def resume(subscription_id: int, conn: Any = None) -> None:
    """A paused subscription sends again: its waiting deliveries at once, oldest first."""
    with use(conn) as c:
        if sql.fetch_one(c, "webhook_resume", {"id": _id(subscription_id),
                                               "now": clock.now()}) is None:
            raise JobNotFound(f"no webhook subscription {subscription_id}")


def log(subscription_id: int, limit: int = 50, conn: Any = None) -> list[dict[str, Any]]:
    with use(conn) as c:
        if sql.fetch_one(c, "webhook_exists", {"id": _id(subscription_id)}) is None:
            raise JobNotFound(f"no webhook subscription {subscription_id}")
        return sql.fetch(c, "webhook_log", {"id": _id(subscription_id), "limit": limit})


# -- signing ----------------------------------------------------------------------------------
def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value: ``v1,<base64 HMAC-SHA256>``."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: datetime,
           tolerance: timedelta = timedelta(minutes=5)) -> bool:
    """What a receiver checks: a signature of this id, timestamp and body, and a timestamp
    within ``tolerance`` of ``now`` (an old delivery replayed is refused)."""
    try:
        msg_id, ts = headers["webhook-id"], int(headers["webhook-timestamp"])
    except (KeyError, ValueError):
        return False
    if abs(now.timestamp() - ts) > tolerance.total_seconds():
        return False
    expected = sign(secret, msg_id, ts, body).encode()
    # as bytes: compare_digest refuses a str that is not ASCII (a forged header is False)
    return any(hmac.compare_digest(expected, s.encode("utf-8", "replace"))
               for s in headers.get("webhook-signature", "").split())


def secret_of(row: Mapping[str, Any]) -> str:
    """A subscription's signing secret, opened in memory to sign."""
    return crypto.open_blob(row["key_id"], bytes(row["secret"]), aad=_aad(row["url"])).decode()


# -- deliveries (the leader's sender) -----------------------------------------------------------
def backoff(failures: int) -> timedelta:
    return BACKOFF[min(max(failures, 1), len(BACKOFF)) - 1]


async def due_subscriptions(conn: AConn) -> list[int]:
    """The subscriptions with a delivery waiting, past their backoff, no attempt out."""
    rows = await sql.afetch(conn, "webhook_due_subscriptions", {"now": clock.now()})
    return [int(r["id"]) for r in rows]


async def lease(conn: AConn, subscription_id: int, *,
                hold: timedelta) -> dict[str, Any] | None:
    """The subscription's oldest waiting delivery, leased for ``hold`` (the attempt's
    deadline and a margin), if the subscription is due; else None. Commit before sending:
    the attempt holds no transaction, the lease keeps other senders off it."""
    now = clock.now()
    return await sql.afetch_one(conn, "webhook_lease", {"id": subscription_id, "now": now,
                                                        "until": now + hold})


async def body_of(conn: AConn, delivery: Mapping[str, Any]) -> bytes:
    """The delivery's body: the one already sent (every retry sends the same bytes), else
    built now from the job, fit to show."""
    if delivery["body"] is not None:
        return bytes(delivery["body"])
    job = await sql.afetch_one(conn, "webhook_job", {"id": delivery["job_id"]})
    data: dict[str, Any] = {"id": delivery["job_id"], "status": delivery["event"]}
    if job is not None:   # pruned since: the event itself is still true
        public = redaction.public_job(job)
        data = {**{k: public[k] for k in JOB_FIELDS}, "status": delivery["event"]}
    if delivery.get("decision"):   # a "decided" event: what the person decided
        data["decision"] = delivery["decision"]
    event = {"type": f"job.{delivery['event']}",
             "timestamp": delivery["created_at"].isoformat(), "data": data}
    return json.dumps(event, default=str, sort_keys=True, separators=(",", ":")).encode()


async def attempted(conn: AConn, delivery: Mapping[str, Any], *, body: bytes,
                    status_code: int | None, error: str | None, took_ms: int) -> int:
    """Log an attempt of a leased delivery (:func:`lease`); the delivery done (a 2xx) or
    not, and then the whole subscription held back for its backoff (new events queue behind
    it: one try per step, not one per event). The subscription's failures in a row; at
    :data:`PAUSE_AFTER` it is paused (still probed at the last step: a success lifts it)."""
    ok = status_code is not None and 200 <= status_code < 300
    now = clock.now()
    failures = 0 if ok else int(delivery["failures"]) + 1
    row = await sql.afetch_one(conn, "webhook_attempted", {
        "id": delivery["id"], "subscription_id": delivery["subscription_id"], "now": now,
        "status_code": status_code, "error": None if ok else (error or "")[:500],
        "took_ms": took_ms, "body": body, "ok": ok,
        "next_try_at": None if ok else now + backoff(failures)})
    failures = int(row["failures"]) if row else 0
    if failures >= PAUSE_AFTER:
        await sql.afetch(conn, "webhook_pause", {
            "id": delivery["subscription_id"], "now": now,
            "reason": f"{failures} attempts failed in a row; last: {(error or '')[:300]}"})
    return failures


async def paused_untold(conn: AConn) -> dict[str, Any] | None:
    return await sql.afetch_one(conn, "webhook_paused_untold")


async def pause_told(conn: AConn, subscription_id: int) -> None:
    await sql.afetch(conn, "webhook_pause_told", {"id": subscription_id, "now": clock.now()})


async def next_try(conn: AConn) -> datetime | None:
    row = await sql.afetch_one(conn, "webhook_next_try", {"now": clock.now()})
    return row["at"] if row else None


async def prune(conn: AConn, *, batch: int = 1000) -> int:
    """Delete delivered deliveries older than :data:`KEEP`; how many (all, in batches)."""
    total = 0
    while True:
        row = await sql.afetch_one(conn, "webhook_prune", {"before": clock.now() - KEEP,
                                                          "limit": batch})
        n = int(row["n"]) if row else 0
        total += n
        if n < batch:
            return total
