"""A test plugin: job type ``ledger_job`` whose handler records each run in a ledger table.

Payload: {"sleep_ms": int, "fail_times": int, "hang": bool, "permanent": bool}.
The ledger (job_id, node, attempt, started, ended) proves "each job ran exactly once" and
"never more than N at a time per portal".
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import psycopg
from pydantic import BaseModel

from portalq.jobs import types
from portalq.jobs.errors import BusinessError, PortalClosed, PortalUnavailable, RetryableError
from portalq.scheduler.handlers import register_handler

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS flags (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS ledger (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, node text NOT NULL, attempt int NOT NULL,
    started timestamptz NOT NULL DEFAULT clock_timestamp(), ended timestamptz)
"""


class LedgerPayload(BaseModel):
    sleep_ms: int = 0
    fail_times: int = 0
    hang: bool = False
    permanent: bool = False
    screenshot: bool = False
    honour_maintenance: bool = False
    #: its failures are outage signs (the portal answers 5xx to this job's data)
    outage: bool = False
    portal: str = "local"


types.register(types.JobType("ledger_job", LedgerPayload, lambda p: p.portal))  # type: ignore[attr-defined]

_conn: psycopg.AsyncConnection[Any] | None = None
_lock = asyncio.Lock()


async def _db() -> psycopg.AsyncConnection[Any]:
    global _conn
    if _conn is None or _conn.closed:
        from portalq.jobs.db.location import connect_options, database_url, libpq_dsn

        # connect_options: no prepared statements behind PgBouncer (test_pgbouncer.py)
        _conn = await psycopg.AsyncConnection.connect(libpq_dsn(database_url()), autocommit=True,
                                                      **connect_options())
    return _conn


async def handler(ctx: Any) -> dict[str, Any]:
    p = ctx.payload
    node = os.environ.get("PORTALQ_NODE_ID", str(os.getpid()))
    async with _lock:
        conn = await _db()
        row = await (await conn.execute(
            "INSERT INTO ledger (job_id, node, attempt) VALUES (%s, %s, %s) RETURNING id",
            (ctx.job_id, node, ctx.attempt))).fetchone()
    if p.get("honour_maintenance"):
        async with _lock:
            down = await (await conn.execute(
                "SELECT 1 FROM flags WHERE name = 'maintenance'")).fetchone()
        if down:
            raise PortalClosed("maintenance page: the system is unavailable", outage=True)
    if p.get("hang"):
        await asyncio.Event().wait()
    if p.get("sleep_ms"):
        await asyncio.sleep(p["sleep_ms"] / 1000)
    async with _lock:
        await conn.execute("UPDATE ledger SET ended = clock_timestamp() WHERE id = %s",
                           (row[0],))
    if p.get("screenshot"):
        # evidence like a flow leaves it (a real PNG), for the escalation mail
        ctx.artifacts_dir.mkdir(parents=True, exist_ok=True)
        (ctx.artifacts_dir / "01-failure.png").write_bytes(tiny_png())
    if p.get("permanent"):
        raise BusinessError("not eligible for online filing")
    if ctx.attempt <= p.get("fail_times", 0):
        if p.get("outage"):
            raise PortalUnavailable(f"HTTP 503 on attempt {ctx.attempt}")
        raise RetryableError(f"system error 109 on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


def tiny_png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 4 for _ in range(4))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


register_handler("ledger_job", handler)


class SecretPayload(BaseModel):
    """``ssn`` is a secret field (sealed at rest); the handler checks it opened right."""

    n: int
    ssn: str
    sleep_ms: int = 0
    portal: str = "local"


types.register(types.JobType("ledger_secret", SecretPayload, lambda p: p.portal,  # type: ignore[attr-defined]
                             secret_fields=("ssn",)))


def secret_ssn(n: int) -> str:
    return f"900-{n // 10000 % 100:02d}-{n % 10000:04d}"


async def secret_handler(ctx: Any) -> dict[str, Any]:
    p = ctx.payload
    if p["ssn"] != secret_ssn(p["n"]):
        raise BusinessError(f"job {ctx.job_id}: the secret did not open to its value")
    if p.get("sleep_ms"):
        await asyncio.sleep(p["sleep_ms"] / 1000)
    return {"checked": True, "attempt": ctx.attempt}


register_handler("ledger_secret", secret_handler)
