"""Issue 35 item 8: an evidence folder that cannot be made never fails a job nor spends an
attempt; the evidence is recorded as missing, and the service says so once."""

from __future__ import annotations

import psycopg

from portalq.jobs import queue
from tests.service_helpers import Service, add_local_portal, wait_until


def test_an_unmakeable_artifacts_folder_fails_no_job(db, dsn, tmp_path):
    add_local_portal(dsn)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifacts folder's parent should be")
    svc = Service(db, tmp_path, "ev", PORTALQ_ARTIFACTS_DIR=str(blocker / "artifacts"),
                  PORTALQ_WORKERS=3).start()
    n = 6
    try:
        # each run asks for its evidence folder and saves a screenshot there
        ids = [j.id for j in queue.enqueue_many([
            queue.NewJob("ledger_job", f"E{i}", {"screenshot": True}) for i in range(n)])]
        wait_until(lambda: all(queue.get_job(i)["status"] in ("completed", "failed")
                               for i in ids), 60, "the jobs finish")
        with psycopg.connect(dsn, autocommit=True) as c:
            wait_until(lambda: c.execute("SELECT count(DISTINCT job_id) FROM portalq.job_artifacts "
                                         "WHERE kind = 'missing'").fetchone()[0] == n,
                       30, "missing evidence recorded")
            notes = c.execute("SELECT path, note FROM portalq.job_artifacts").fetchall()
    finally:
        svc.stop()
    assert [(queue.get_job(i)["status"], queue.get_job(i)["attempts"]) for i in ids] == \
        [("completed", 1)] * n
    assert all(path == "evidence folder" and "Not a directory" in note
               for path, note in notes), notes
    log = svc.log()
    assert "Traceback" not in log
    # said once at the start (one line), not once per job
    assert log.count("artifacts folder") == 1, log
