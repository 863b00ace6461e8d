"""`portalq keys rotate` / `retire` while `portalq run` works through sealed jobs."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from portalq.jobs import queue
from portalq.jobs.secrets import crypto
from tests.conftest import run_cli
from tests.plugins.ledger import secret_ssn
from tests.service_helpers import Service, add_local_portal, wait_until

pytestmark = pytest.mark.slow


def _jobs(start: int, n: int, run_at: datetime | None = None) -> list[queue.NewJob]:
    return [queue.NewJob("ledger_secret", f"R-{i}", {"n": i, "ssn": secret_ssn(i),
                                                      "sleep_ms": 25}, run_at=run_at)
            for i in range(start, start + n)]


def test_rotation_and_retirement_while_the_service_runs(db, dsn, tmp_path):
    add_local_portal(dsn)
    keyfile = tmp_path / "keys.json"
    ring = crypto.FileKeyring(keyfile, create=True)
    crypto.set_provider(ring)   # this process enqueues with the service's key file
    env = {"PORTALQ_KEY_FILE": str(keyfile), "PORTALQ_PLUGINS": "tests.plugins.ledger"}
    try:
        old = ring.current_id()
        queue.enqueue_many(_jobs(0, 200))
        # Half are held an hour, so the rotation surely meets waiting jobs however fast the
        # service drains the other half (four workers can finish 200 jobs before the CLI
        # has imported); they are released once the rotation is done.
        queue.enqueue_many(_jobs(200, 200, run_at=datetime.now(UTC) + timedelta(hours=1)))
        svc = Service(db, tmp_path, "rot", PORTALQ_KEY_FILE=keyfile, PORTALQ_WORKERS=4).start()
        try:
            out = run_cli("keys", "rotate", "--batch", "25", env=env)
            assert out.returncode == 0, out.stderr
            rewrapped = int(re.search(r"re-wrapped (\d+) job", out.stdout).group(1))
            new = ring.current_id()
            assert new != old and rewrapped >= 200   # the held jobs at least
            with psycopg.connect(dsn) as c:
                c.execute("UPDATE portalq.job_queue SET run_at = now() WHERE run_at > now()")
            queue.enqueue_many(_jobs(400, 100))   # sealed under the new key
            out = run_cli("keys", "retire", old, env=env)
            assert out.returncode == 0, out.stderr
            assert ring.key_ids() == [new]
            wait_until(lambda: len(queue.list_jobs(status="completed", limit=501)) == 500, 120,
                       "every job", interval=0.2)
        finally:
            svc.stop()
        with psycopg.connect(dsn) as c:
            rows = c.execute("SELECT status, result, attempts FROM portalq.job_queue").fetchall()
        assert {r[0] for r in rows} == {"completed"}
        assert all(r[1]["checked"] for r in rows)   # every secret opened to its value
        retried = sum(r[2] > 1 for r in rows)
        assert retried <= 4, f"{retried} jobs needed a second attempt"
        status = json.loads(run_cli("keys", "status", "--json", env=env).stdout)
        assert status["keys"] == [new] and status["stored_values"] == {}   # all erased
        assert old not in keyfile.read_text()
    finally:
        crypto.set_provider(None)
