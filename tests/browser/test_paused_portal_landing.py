"""A portal paused by the circuit breaker, seen with its landing page (issue 48, item 19).

Three jobs pause the portal; two are cancelled. The lone job left used to be given up as
a broken probe 11.8 s into the outage ("while other jobs waited": none did), and a portal
with no job left waiting was never probed again. Now a failed probe is charged to its job
only when the portal's landing page answers; and the leader checks the landing page of a
paused portal with no job waiting, resuming it when the page answers.

The portal's landing page is a real HTTP server in this test (503 while "down"); the
jobs' own outage is the ledger plugin's maintenance flag. Both are turned on and off
together, as a real outage would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from portalq.jobs import queue
from portalq.jobs.errors import IllegalTransition
from tests.service_helpers import Service, add_local_portal, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


class Landing:
    """A portal's landing page: 503 while ``down``, else 200; counts the requests."""

    def __init__(self) -> None:
        self.down = True
        self.hits = 0
        landing = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                landing.hits += 1
                status = 503 if landing.down else 200
                body = b"<title>maintenance</title>" if landing.down else b"<title>portal</title>"
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def landing() -> Iterator[Landing]:
    site = Landing()
    yield site
    site.close()


def _service(db: str, tmp_path: Any, landing: Landing) -> Service:
    return Service(db, tmp_path, "lone", PORTALQ_BREAKER_THRESHOLD=3,
                   PORTALQ_BREAKER_PROBE_SECONDS=0.5, PORTALQ_BREAKER_PROBE_LIMIT=2,
                   PORTALQ_WORKERS=3, PORTALQ_TICK_SECONDS=0.5,
                   PORTALQ_PORTAL_URL_DOWN=landing.url).start()


def _pause_with_three(c: psycopg.Connection[Any]) -> list[int]:
    """Three jobs show the outage; the breaker pauses the portal."""
    ids = [j.id for j in queue.enqueue_many([
        queue.NewJob("ledger_job", f"D{i}", {"portal": "down", "honour_maintenance": True})
        for i in range(3)])]
    wait_until(lambda: c.execute("SELECT paused_by FROM portalq.portals WHERE code = 'down'"
                                 ).fetchone()[0] == "breaker", 30, "the breaker pauses the portal")
    return ids


def _cancelled(job_id: int) -> bool:
    """Cancel the job unless it is running just now (a probe): then the next poll does."""
    try:
        queue.cancel(job_id)
    except IllegalTransition:
        return queue.get_job(job_id)["status"] == "cancelled"
    return True


def _outage(c: psycopg.Connection[Any], landing: Landing, down: bool) -> None:
    c.execute("INSERT INTO flags VALUES ('maintenance') ON CONFLICT DO NOTHING" if down
              else "DELETE FROM flags")
    landing.down = down


def test_a_lone_job_is_not_given_up_for_its_portals_outage(db, dsn, tmp_path, landing):
    add_local_portal(dsn, code="down", max_sessions=3)
    with psycopg.connect(dsn, autocommit=True) as c:
        _outage(c, landing, True)
        svc = _service(db, tmp_path, landing)
        try:
            lone, *others = _pause_with_three(c)
            for job_id in others:
                wait_until(lambda j=job_id: _cancelled(j), 30, f"job {job_id} cancelled")

            def probes() -> int:
                return c.execute("SELECT count(*) FROM portalq.job_events WHERE job_id = %s "
                                 "AND detail->>'event' IN ('probe failed', 'probe given up')",
                                 (lone,)).fetchone()[0]
            # three times the probe limit: the lone job alone probes the portal's outage
            wait_until(lambda: probes() >= 6 or queue.get_job(lone)["status"] == "failed",
                       60, "the lone job's probes")
            given_up = queue.get_job(lone)["status"]
            uncharged = c.execute("SELECT count(*) FROM portalq.job_events WHERE job_id = %s "
                                  "AND detail->>'landing_down' = 'true'", (lone,)).fetchone()[0]
            escalations = [r[0] for r in c.execute("SELECT reason FROM portalq.escalations")]
            assert given_up != "failed" and escalations == [], escalations
            _outage(c, landing, False)   # the portal is back: the next probe resumes it
            wait_until(lambda: queue.get_job(lone)["status"] == "completed", 30,
                       "the lone job completes after the outage")
            paused = c.execute("SELECT paused_by FROM portalq.portals WHERE code = 'down'"
                               ).fetchone()[0]
        finally:
            svc.stop()
    assert uncharged >= 4   # its probes were seen to show the portal's own outage
    assert paused is None
    assert queue.get_job(lone)["attempts"] == 1


def test_a_paused_portal_with_no_job_waiting_resumes_when_its_landing_page_answers(
        db, dsn, tmp_path, landing):
    add_local_portal(dsn, code="down", max_sessions=3)
    with psycopg.connect(dsn, autocommit=True) as c:
        _outage(c, landing, True)
        svc = _service(db, tmp_path, landing)
        try:
            for job_id in _pause_with_three(c):
                wait_until(lambda j=job_id: _cancelled(j), 30, f"job {job_id} cancelled")
            hits = landing.hits
            # still down: the landing page is checked (no job spends anything) and the
            # portal stays paused
            wait_until(lambda: landing.hits >= hits + 2, 30, "the landing page checked")
            assert c.execute("SELECT paused_by FROM portalq.portals WHERE code = 'down'"
                             ).fetchone()[0] == "breaker"
            _outage(c, landing, False)
            wait_until(lambda: c.execute("SELECT paused_by FROM portalq.portals WHERE code = "
                                         "'down'").fetchone()[0] is None, 30,
                       "the portal resumed by its landing page")
            notices = [r[0] for r in c.execute(
                "SELECT kind FROM portalq.portal_notices WHERE portal = 'down' ORDER BY id")]
        finally:
            svc.stop()
    assert notices == ["paused", "resumed"]
    assert all(queue.get_job(j["id"])["attempts"] <= 1 for j in queue.list_jobs(status="cancelled"))
