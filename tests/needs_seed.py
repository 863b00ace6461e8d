"""What needs a person, written as the service writes it (issue 39's "Needs you" page): a
question the flow waits on, an approval stopped at its review page (its review screenshot
and the failure shot its waiting attempt ended with), an uncertain EIN filing, a Delaware
filing waiting on the registry past its expected time, and failed jobs of one cause (one
portal outage). Shared by the browser tests and tools/needs_screenshots.py."""

from __future__ import annotations

import json
import struct
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from portalq.jobs import clock, queue
from tests import payloads
from tests.checkpoints import in_doubt


def png(width: int, height: int, rgb: tuple[int, int, int] = (0x80, 0x90, 0xA0)) -> bytes:
    """A plain PNG of the given size (a stand-in for a page's screenshot)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    row = b"\x00" + bytes(rgb) * width
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def _artifact(c: Any, artifacts: Path, job_id: int, attempt: int, name: str,
              data: bytes) -> None:
    folder = artifacts / str(job_id) / f"attempt-{attempt}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    c.execute("INSERT INTO portalq.job_artifacts (job_id, attempt, kind, path, created_at) "
              "VALUES (%s, %s, 'screenshot', %s, %s)", (job_id, attempt, str(folder / name),
                                                       clock.now()))


def seed(dsn: str, artifacts: Path, *, outage: int = 3, tag: str = "N",
         review_png: bytes | None = None) -> dict[str, Any]:
    """{"question", "approval", "uncertain", "waiting": job id, "outage": [job ids]}."""
    now = clock.now()
    ids: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as c:
        q = ids["question"] = queue.enqueue("file_entity", f"ORD-{tag}-Q",
                                            payloads.FILE_ENTITY_BC, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'running', attempts = 1 WHERE id = %s",
                  (q,))
        c.execute("INSERT INTO portalq.job_questions (job_id, attempt, question, asked_at, "
                  "deadline) VALUES (%s, 1, %s, %s, %s)",
                  (q, "the one-time code BC Registries e-mailed to ops@example.com", now,
                   now + timedelta(minutes=15)))
        queue.escalate(c, q, 1, "question", "waiting for a person: the one-time code")

        a = ids["approval"] = queue.enqueue("process_crtc", f"ORD-{tag}-A",
                                            payloads.ALL["process_crtc"], conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', attempts = 1, run_at = %s, "
                  "last_error = 'waiting for approval at the review page', checkpoint = %s "
                  "WHERE id = %s",
                  (now + timedelta(days=7), json.dumps({"step": "waiting for approval",
                   "approval": {"state": "pending", "digest": "9f2c" + "0" * 60,
                                "asked_at": now.isoformat(), "changed": False}}), a))
        _artifact(c, artifacts, a, 1, "03-review-for-approval.png",
                  review_png or png(1200, 800, (0xE8, 0xEE, 0xF6)))
        _artifact(c, artifacts, a, 1, "04-failure.png", png(1200, 800, (0xC0, 0x30, 0x30)))
        queue.escalate(c, a, 1, "approval", "at the review page")

        u = ids["uncertain"] = queue.enqueue("obtain_ein", f"ORD-{tag}-U",
                                             payloads.OBTAIN_EIN, conn=c).id
        c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 1, finished_at = %s, "
                  "checkpoint = %s, last_error = %s WHERE id = %s",
                  (now, json.dumps(in_doubt("ein_application")),
                   "uncertain: no answer after Submit EIN Request", u))
        queue.escalate(c, u, 1, "uncertain", "the IRS may have assigned the EIN")

        w = ids["waiting"] = queue.enqueue("file_entity", f"ORD-{tag}-W",
                                           payloads.FILE_ENTITY_DE, conn=c).id
        since = now - timedelta(days=3)
        c.execute("UPDATE portalq.job_queue SET status = 'deferred', attempts = 1, run_at = %s, "
                  "checkpoint = %s WHERE id = %s",
                  (now + timedelta(hours=2), json.dumps({"waiting": {
                      "portal": "delaware_icis", "since": since.isoformat(),
                      "expected_by": (since + timedelta(days=2)).isoformat(),
                      "what": "examination (INPROGRESS)", "checks": 9,
                      "last_check": (now - timedelta(hours=1)).isoformat(),
                      "next_check": (now + timedelta(hours=2)).isoformat()}}), w))

        ids["outage"] = []
        for n in range(outage):
            j = queue.enqueue("obtain_ein", f"ORD-{tag}-F{n}", payloads.OBTAIN_EIN, conn=c).id
            c.execute("UPDATE portalq.job_queue SET status = 'failed', attempts = 5, "
                      "finished_at = %s, last_error = %s WHERE id = %s",
                      (now, f"PortalUnavailable: IRS answered 503 for request {1000 + n}", j))
            queue.escalate(c, j, 5, "attempts", "every attempt failed")
            ids["outage"].append(j)
    return ids
