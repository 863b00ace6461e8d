"""Issue 35 item 10: a node without the data-key file refuses to claim sealed jobs (and says
so once); they wait for a node that has the key, attempts untouched."""

from __future__ import annotations

import psycopg

from portalq.jobs import queue
from tests.plugins import ledger
from tests.service_helpers import Service, add_local_portal, wait_until


def test_a_node_without_the_key_file_leaves_sealed_jobs_to_a_node_that_has_it(db, dsn,
                                                                              tmp_path):
    add_local_portal(dsn)
    sealed = [queue.enqueue("ledger_secret", f"S{i}", {"n": i, "ssn": ledger.secret_ssn(i)})
              for i in range(3)]
    # a node whose key file is missing (a fresh folder: its keyring is not the one the
    # jobs were sealed with)
    keyless = Service(db, tmp_path, "keyless",
                      PORTALQ_KEY_FILE=str(tmp_path / "elsewhere" / "keys.json")).start()
    try:
        # an unsealed job enqueued after them: the claims that take it would have taken
        # the sealed ones first (same portal, earlier run_at and id)
        plain = queue.enqueue("ledger_job", "P1", {})
        wait_until(lambda: queue.get_job(plain.id)["status"] == "completed", 30,
                   "the plain job runs on the keyless node")
        wait_until(lambda: "cannot open" in keyless.log(), 30, "the keyless node says so")
        rows = [queue.get_job(j.id) for j in sealed]
    finally:
        keyless.stop()
    assert [(r["status"], r["attempts"]) for r in rows] == [("pending", 0)] * 3
    assert keyless.log().count("cannot open") == 1   # said once
    assert "Traceback" not in keyless.log()
    # and it made no keyring of its own (issue 48 item 21): it said how to get one
    assert not (tmp_path / "elsewhere" / "keys.json").exists()
    assert "no keyring at" in keyless.log() and "portalq keys init" in keyless.log()
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM portalq.escalations").fetchone()[0] == 0
    keyed = Service(db, tmp_path, "keyed").start()   # the test keyring (conftest)
    try:
        wait_until(lambda: all(queue.get_job(j.id)["status"] == "completed" for j in sealed),
                   30, "a node with the key runs them")
    finally:
        keyed.stop()
    assert [queue.get_job(j.id)["attempts"] for j in sealed] == [1] * 3
