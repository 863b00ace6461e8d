"""A node partitioned from the database while it still reaches the portals (issue 18): it
fences itself — stops its flows before its jobs can be rescued elsewhere — so no two runs
of one job overlap and nothing is filed twice; when the partition heals, its late writes
are refused. Three nodes: "part" in a network namespace of its own (one link to the
database network, one to the portals network), "b" and "c" on this host."""

from __future__ import annotations

import collections
import json
import re
import time
import urllib.request
from datetime import datetime

import psycopg
import pytest
from sqlalchemy.engine import make_url

from jobs.embedded import EmbeddedPostgres
from jobs.migrate import upgrade
from portals.standin.app import StandinServer
from tests import netns, payloads
from tests.service_helpers import Service, open_all_hours, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOBS = 6
STALE = 3.0
NET = {"db": "10.231.0", "portals": "10.232.0"}


def _post(url: str, body: dict) -> None:
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).close()


def _ledger(base: str) -> list[dict]:
    with urllib.request.urlopen(f"{base}/_ledger/delaware_icis", timeout=10) as r:
        return json.loads(r.read())


def _log_times(text: str, needle: str) -> list[datetime]:
    return [datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
            for m in re.finditer(r"^(\S+Z) .*" + re.escape(needle), text, re.M)]


def test_a_partitioned_node_fences_itself_and_nothing_is_filed_twice(tmp_path, monkeypatch):
    why = netns.available()
    if why:
        pytest.skip(why)
    with netns.NetNs("pqpart", NET) as ns:
        db_ip = ns.host_ip("db")
        pg = EmbeddedPostgres(tmp_path / "pg", settings={"fsync": "off",
                                                          "listen_addresses": db_ip})
        url = pg.ensure_running()
        try:
            # the namespace reaches the server over TCP, on the address the test gave it
            with open(pg.pgdata / "pg_hba.conf", "a") as fh:
                fh.write(f"host all all {NET['db']}.0/24 trust\n")
            with psycopg.connect(pg.dsn()) as c:
                c.execute("SELECT pg_reload_conf()")
            tcp_url = make_url(url).set(host=db_ip, port=5432, query={}).render_as_string(
                hide_password=False)
            monkeypatch.setenv("PORTALQ_DATABASE_URL", url)
            upgrade(url)
            dsn = pg.dsn()
            open_all_hours(dsn)
            with StandinServer(host=ns.host_ip("portals")) as standin:
                _scenario(tmp_path, ns, url, tcp_url, dsn, standin.base_url)
        finally:
            pg.destroy()   # as root its data directory is outside tmp_path


def _scenario(tmp_path, ns, url, tcp_url, dsn, base):
    from jobs import queue

    _post(f"{base}/_control/delaware_icis", {"slow_ms": 400})   # long flows
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE portals SET max_concurrent_sessions = NULL")
    common = {"PORTALQ_STANDIN_URL": base, "PORTALQ_WORKERS": 3,
              "PORTALQ_STALE_AFTER_SECONDS": STALE, "PORTALQ_RETRY_BASE_SECONDS": 0.2}
    # b starts first: it is the leader (it rescues); "part" runs in the namespace
    b = Service(url, tmp_path, "b", **{**common, "PORTALQ_WORKERS": 1}).start()
    part = Service(tcp_url, tmp_path, "part", wrap=ns.cmd, **common).start()
    c = None
    try:
        [queue.enqueue("file_entity", f"ORD-P{i}", {
            **payloads.FILE_ENTITY_DE, "legal_name": f"Partition {i} LLC"}).id
            for i in range(JOBS)]
        with psycopg.connect(dsn, autocommit=True) as conn:
            held = wait_until(lambda: [r[0] for r in conn.execute(
                "SELECT id FROM job_queue WHERE status = 'running' AND lock_owner = 'part'")]
                if conn.execute("SELECT count(*) FROM job_queue WHERE status = 'running' "
                                "AND lock_owner = 'part'").fetchone()[0] >= 2 else None,
                60, "the partitioned node runs flows")
            c = Service(url, tmp_path, "c", **common).start()
            cut = time.monotonic()
            cut_at = datetime.now().astimezone()
            ns.partition("db")                     # it still reaches the portals
            time.sleep(STALE * 2.5)                # longer than the stale time
            rescued_at = {r[0]: r[1] for r in conn.execute(
                "SELECT job_id, min(at) FROM job_events WHERE detail->>'event' = 'rescued' "
                "AND job_id = ANY(%s) GROUP BY 1", (held,))}
            ns.heal("db")
            healed = time.monotonic()
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM job_queue WHERE status IN ('completed', 'failed')"
            ).fetchone()[0] == JOBS, 120, "every job final")
            rows = conn.execute("SELECT id, status, lock_owner FROM job_queue ORDER BY id"
                                ).fetchall()
            # what its rescued runs wrote after the rescue: an outcome written by "part"
            # after the rescue, with no new claim by "part" in between (it may rightly
            # claim and run the job again once it reaches the database)
            late = conn.execute("""
                SELECT e.job_id, e.at, e.to_status FROM job_events e
                JOIN LATERAL (SELECT min(r.at) AS at FROM job_events r WHERE r.job_id =
                              e.job_id AND r.detail->>'event' = 'rescued') r ON true
                WHERE e.worker = 'part' AND e.job_id = ANY(%s) AND e.from_status = 'running'
                  AND e.at > r.at AND NOT EXISTS (
                      SELECT 1 FROM job_events cl WHERE cl.job_id = e.job_id
                        AND cl.worker = 'part' AND cl.to_status = 'running'
                        AND cl.at > r.at AND cl.at < e.at)""", (held,)).fetchall()
            finishers = dict(conn.execute(
                "SELECT job_id, worker FROM job_events WHERE to_status = 'completed'"
            ).fetchall())
    finally:
        for svc in (part, b, c):
            if svc is not None:
                svc.stop()
    part_log = part.log()
    fenced = _log_times(part_log, "self-fencing")
    ledger = _ledger(base)
    per_job = collections.Counter(e["client_ref"] for e in ledger)
    assert [r[1] for r in rows] == ["completed"] * JOBS, rows
    assert len(ledger) == JOBS and set(per_job.values()) == {1}     # filed exactly once
    assert fenced, "the partitioned node never fenced itself"
    fence_s = (fenced[0] - cut_at).total_seconds()
    assert set(rescued_at) == set(held)        # its jobs were rescued elsewhere ...
    first_rescue = min(rescued_at.values())
    assert fenced[0] < first_rescue            # ... only after it had stopped their flows
    assert fence_s < STALE
    assert late == [], late                    # its late writes were refused
    assert set(finishers) == {r[0] for r in rows}
    print(f"partition: fenced after {fence_s:.2f}s, first rescue after "
          f"{(first_rescue - cut_at).total_seconds():.2f}s (stale time {STALE:.0f}s), "
          f"healed after {healed - cut:.1f}s; {len(held)} jobs moved, {JOBS} filed once")
