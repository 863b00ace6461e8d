"""`portalq status --once / --json`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from portalq.jobs import queue
from tests import payloads
from tests.conftest import run_cli


def test_status_snapshot_json_and_text(db):
    queue.enqueue("name_search", "ORD-1", payloads.NAME_SEARCH)
    later = datetime.now(UTC) + timedelta(days=2)
    queue.enqueue("process_crtc", "ORD-2", payloads.PROCESS_CRTC, run_at=later)
    out = run_cli("status", "--json")
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    assert snap["depth"] == {"bc_corporate_online": {"pending": 1}, "crtc": {"pending": 1}}
    assert snap["running"] == [] and snap["failures"] == []
    text = run_cli("status", "--once", env={"COLUMNS": "160"}).stdout
    assert "bc_corporate_online" in text and "recent failures" in text
