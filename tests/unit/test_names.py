"""The queue's names live in jobs/kinds.py: the statuses the schema allows, the lock keys
(distinct, and the ones SQL and the shipped migration use), the NOTIFY channels."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import portalq.jobs as jobs
import portalq.migrations as migrations
from portalq.jobs.kinds import FINAL, Channel, JobStatus, LockKey

ROOT = Path(jobs.__file__).parent.parent
QUERIES = resources.files("portalq.jobs.db.sql").joinpath("queries.sql").read_text()


def test_job_statuses_are_exactly_those_the_schema_allows():
    initial = (Path(migrations.__file__).parent / "versions" / "0001_initial.py").read_text()
    allowed = re.search(r'"status IN \(([^)]*)\)", name=.job_queue_status.', initial)
    assert allowed is not None
    assert {s.strip("'") for s in allowed.group(1).split(",")} == {s.value for s in JobStatus}
    assert JobStatus.FAILED == "failed" and FINAL == {"completed", "failed", "cancelled"}


def test_lock_keys_are_distinct_and_no_bare_key_is_left_in_code_or_sql():
    assert len({int(k) for k in LockKey}) == len(LockKey)
    sources = [QUERIES] + [p.read_text() for d in ("jobs", "scheduler", "portals")
                           for p in (ROOT / d).rglob("*.py") if p.name != "kinds.py"]
    for key in LockKey:
        assert not any(re.search(rf"\b{int(key)}\b", text) for text in sources), key.name
    # every lock is taken by a named statement in queries.sql
    assert not any("advisory_" in text for text in sources[1:])


def test_the_shipped_claim_function_uses_the_named_portal_key():
    # a migration's text stays as it shipped: the name must agree with it
    text = (Path(migrations.__file__).parent / "versions" / "0006_claim_function.py").read_text()
    assert f"pg_advisory_xact_lock({int(LockKey.CLAIM_PORTAL)}, hashtext(p))" in text


def test_every_channel_sql_notifies_on_is_named():
    sent = set(re.findall(r"pg_notify\('(\w+)'", QUERIES))
    triggers = "".join(p.read_text() for p in
                       (Path(migrations.__file__).parent / "versions").glob("*.py"))
    sent |= set(re.findall(r"pg_notify\('(\w+)'", triggers))
    assert sent and sent <= {c.value for c in Channel}


def test_every_event_label_the_sql_writes_is_named():
    from portalq.jobs.kinds import EventKind

    written = set(re.findall(r"""'\{"event": "([^"]+)"\}'""", QUERIES))
    written |= set(re.findall(r"jsonb_build_object\('event', '([^']+)'", QUERIES))
    assert written and written <= {e.value for e in EventKind}
