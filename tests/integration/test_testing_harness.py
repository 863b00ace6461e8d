"""``portalq.testing`` (issue 40): a plugin's test runs the real service on a database of
its own when none is configured (an embedded server, gone at the end), and a wait for a
status the job will never reach says so as soon as the job is decided."""

from __future__ import annotations

import pytest

from portalq.jobs.db.embedded import EmbeddedPostgres
from portalq.testing import Service
from tests.conftest import ROOT


@pytest.mark.e2e
def test_a_service_without_a_database_url_runs_jobs_on_an_embedded_one_of_its_own(
        monkeypatch):
    monkeypatch.delenv("PORTALQ_DATABASE_URL", raising=False)
    with Service(plugins="tests.plugins.renewal", env={"PYTHONPATH": str(ROOT)}) as service:
        data = EmbeddedPostgres(service.home).pgdata
        assert service.own_database and (data / "PG_VERSION").exists()
        job = service.enqueue("renew_licence", {"licence": "L-1", "owner_ssn": "123-45-6789"},
                              order="ORD-H1")
        with service.node():
            shown = service.wait_for(job, "completed", within=60)
            with pytest.raises(AssertionError, match=f"job {job} is completed, not failed"):
                service.wait_for(job, "failed", within=60)
    assert shown["result"] == {"renewed": "L-1"}
    assert not (data / "PG_VERSION").exists()   # the test's database went with it
