"""Issue 35 item 9, the crash path: a job of a portal with a lookup that reaches the crash
limit past its submission gets one more run (its lookup) and then goes to a person as
"crashing" -- never "uncertain", whose --not-filed skips the lookup -- with no lookup
answer older than the submission in doubt, and a mail that offers no cancel."""

from __future__ import annotations

import json
from datetime import timedelta

from portalq.jobs import clock, queue
from portalq.scheduler import mailer
from portalq.scheduler.config import Settings
from tests import checkpoints
from tests.integration.test_faults import _after_server_start, _rescue, _stale


def test_a_filing_at_the_crash_limit_is_looked_up_once_then_a_person_retries_it(db, dsn,
                                                                              conn):
    from tests import payloads

    de = queue.enqueue("file_entity", "ORD-DE", dict(payloads.FILE_ENTITY_DE))
    conn.execute("UPDATE portalq.job_queue SET checkpoint = %s, crashes = 3",
                 (json.dumps({**checkpoints.in_doubt(), "reconciled": "not_found"}),))
    clock.set_clock(clock.FrozenClock(_after_server_start()))
    _stale(conn, [de.id], clock.now() - timedelta(seconds=61))
    assert _rescue(dsn) == {de.id: "pending"}           # the fourth crash: one more run
    assert "reconciled" not in queue.get_job(de.id)["checkpoint"]
    conn.execute("UPDATE portalq.job_queue SET checkpoint = checkpoint || %s WHERE id = %s",
                 (json.dumps({"reconciled": "not_found"}), de.id))
    _stale(conn, [de.id], clock.now() - timedelta(seconds=61))
    assert _rescue(dsn) == {de.id: "failed"}            # the fifth: a person
    [(kind, reason)] = conn.execute("SELECT kind, reason FROM portalq.escalations").fetchall()
    assert kind == "crashing" and "looks it up" in reason
    row = queue.get_job(de.id)
    assert "reconciled" not in row["checkpoint"]
    esc = {"id": 1, "job_id": de.id, "job_type": "file_entity", "order_id": "ORD-DE",
           "portal": row["portal"], "kind": kind, "reason": reason,
           "attempts": row["attempts"], "max_attempts": row["max_attempts"],
           "last_error": row["last_error"], "checkpoint": row["checkpoint"]}
    body = mailer.build_escalation(Settings(), esc, None).get_body(("plain",)).get_content()
    assert "cancel" not in body.split("To act:", 1)[1] and "--not-filed" not in body
