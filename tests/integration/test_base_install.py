"""Issue 40: ``portalq run`` from a base install (no ``[console]`` extra) runs jobs."""

from __future__ import annotations

import psycopg

from portalq.jobs import queue
from tests.base_install import base_install
from tests.service_helpers import Service, add_local_portal, wait_until


def test_the_service_runs_jobs_without_the_console_packages(db, dsn, tmp_path):
    add_local_portal(dsn)
    svc = Service(db, tmp_path, "base", wrap=base_install).start()
    try:
        job = queue.enqueue("ledger_job", "O1", {})
        with psycopg.connect(dsn, autocommit=True) as c:
            wait_until(lambda: c.execute("SELECT status FROM portalq.job_queue WHERE id = %s",
                                         (job.id,)).fetchone()[0] == "completed",
                       30, "the job completed")
    finally:
        svc.stop()
    assert svc.proc is not None and svc.proc.returncode == 0, svc.log()
