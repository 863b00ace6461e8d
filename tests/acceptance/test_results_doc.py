"""docs/results.md's LISTEN example runs as written (so it cannot rot): it hears a job
cancelled in another session, with its id, order id, type and status."""

from __future__ import annotations

import re
import threading
from typing import Any

import psycopg

from portalq.jobs import queue
from tests import payloads
from tests.conftest import ROOT

FOREVER = "conn.notifies()"


def _example() -> str:
    text = (ROOT / "docs" / "results.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 11 and FOREVER in code
    return code.replace(FOREVER, "conn.notifies(stop_after=1, timeout=60)")  # once, for a test


def _listening(conn: psycopg.Connection[Any]) -> bool:
    return bool(conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND state = 'idle' AND query = 'LISTEN portalq_job_status'").fetchone()[0])


def test_the_documented_listen_example_hears_a_cancel(db, dsn):
    job = queue.enqueue("deliver", "ORD-1001", payloads.DELIVER)
    printed: list[tuple[Any, ...]] = []
    scope = {"database_url": dsn, "print": lambda *a: printed.append(a)}
    app = threading.Thread(target=exec, args=(compile(_example(), "results.md", "exec"), scope))
    app.start()
    with psycopg.connect(dsn, autocommit=True) as c:
        while app.is_alive() and not _listening(c):
            c.execute("SELECT pg_sleep(0.05)")   # until the example has subscribed
    queue.cancel(job.id)
    app.join(60)
    assert printed == [("ORD-1001", "deliver", "cancelled", job.id)]
