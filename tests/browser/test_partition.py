"""A node partitioned from the database while it still reaches the portals (issue 18): it
fences itself — stops its flows before its jobs can be rescued elsewhere — so no two runs
of one job overlap and nothing is filed twice; when the partition heals, its late writes
are refused. Three nodes: "part" in a network namespace of its own (one link to the
database network, one to the portals network), "b" and "c" on this host.

And the leader's duties move and come back: a leader ("part" again, in its namespace)
partitioned from the database loses its lock (the server drops its session: keepalives),
another node takes the duties (it rescues part's jobs); healed, part ticks again but leaves
them with their live holder, and takes them back when that node stops. Who leads is read
from the server (the session holding the leader's advisory lock, and the address it
comes from) and from what each node's ticks did (/health ``last_tick_summary``: empty
when a tick did no duties)."""

from __future__ import annotations

import collections
import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
from datetime import datetime

import psycopg
import pytest
from sqlalchemy.engine import make_url

from portalq.jobs.db.embedded import EmbeddedPostgres
from portalq.jobs.db.migrate import upgrade
from portalq.portals.standin.server import StandinServer
from tests import netns, payloads
from tests.ports import free_port
from tests.service_helpers import (
    Service,
    add_local_portal,
    health,
    open_all_hours,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JOBS = 6
STALE = 3.0
NET = {"db": "10.231.0", "portals": "10.232.0"}
LEAD_NET = {"db": "10.233.0"}
#: the leader's session lock (``try_leader_lock`` in jobs/db/sql/queries.sql): who holds it,
#: from where (an address: a TCP client, here a namespace; NULL: the Unix socket)
LEADER = ("SELECT host(a.client_addr) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = "
          "l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
          "AND (l.classid::bigint << 32 | l.objid::bigint) = 7262010200 AND l.database = "
          "(SELECT oid FROM pg_database WHERE datname = current_database())")
PART_METRICS = 9464   # inside part's namespace: nothing else listens there
HEALTH = f"""
import sys, urllib.error, urllib.request
try:
    body = urllib.request.urlopen('http://127.0.0.1:{PART_METRICS}/health', timeout=10).read()
except urllib.error.HTTPError as exc:   # 503 while its claims fail: the same JSON
    body = exc.read()
sys.stdout.write(body.decode())
"""


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


@contextlib.contextmanager
def _database(tmp_path, ns, net, monkeypatch):
    """A server on the host's end of the namespace's "db" link: (url, tcp_url, dsn) -- the
    Unix-socket URL for nodes on this host, the TCP URL for the node in the namespace."""
    db_ip = ns.host_ip("db")
    pg = EmbeddedPostgres(tmp_path / "pg", settings={"fsync": "off",
                                                      "listen_addresses": db_ip})
    url = pg.ensure_running()
    try:
        # the namespace reaches the server over TCP, on the address the test gave it
        with open(pg.pgdata / "pg_hba.conf", "a") as fh:
            fh.write(f"host all all {net['db']}.0/24 trust\n")
        with psycopg.connect(pg.dsn()) as c:
            c.execute("SELECT pg_reload_conf()")
        tcp_url = make_url(url).set(host=db_ip, port=5432, query={}).render_as_string(
            hide_password=False)
        monkeypatch.setenv("PORTALQ_DATABASE_URL", url)
        upgrade(url)
        yield url, tcp_url, pg.dsn()
    finally:
        pg.destroy()   # as root its data directory is outside tmp_path


def test_a_partitioned_node_fences_itself_and_nothing_is_filed_twice(tmp_path, monkeypatch):
    why = netns.available()
    if why:
        pytest.skip(why)
    with netns.NetNs("pqpart", NET) as ns, \
            _database(tmp_path, ns, NET, monkeypatch) as (url, tcp_url, dsn):
        open_all_hours(dsn)
        with StandinServer(host=ns.host_ip("portals")) as standin:
            _scenario(tmp_path, ns, url, tcp_url, dsn, standin.base_url)


def _scenario(tmp_path, ns, url, tcp_url, dsn, base):
    from portalq.jobs import queue

    _post(f"{base}/_control/delaware_icis", {"slow_ms": 400})   # long flows
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE portalq.portals SET max_concurrent_sessions = NULL")
    # a filed Delaware request asks a person at its first check (no page known to exist
    # shows the decision, issue 53): every job ends there, filed once
    common = {"PORTALQ_STANDIN_URL": base, "PORTALQ_WORKERS": 3,
              "PORTALQ_STALE_AFTER_SECONDS": STALE, "PORTALQ_RETRY_BASE_SECONDS": 0.2,
              "PORTALQ_PORTAL_CHECK_SECONDS": 1}
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
                "SELECT id FROM portalq.job_queue WHERE status = 'running' AND lock_owner = 'part'")]
                if conn.execute("SELECT count(*) FROM portalq.job_queue WHERE status = 'running' "
                                "AND lock_owner = 'part'").fetchone()[0] >= 2 else None,
                60, "the partitioned node runs flows")
            c = Service(url, tmp_path, "c", **common).start()
            cut = time.monotonic()
            cut_at = datetime.now().astimezone()
            ns.partition("db")                     # it still reaches the portals
            time.sleep(STALE * 2.5)                # longer than the stale time
            rescued_at = {r[0]: r[1] for r in conn.execute(
                "SELECT job_id, min(at) FROM portalq.job_events WHERE detail->>'event' = 'rescued' "
                "AND job_id = ANY(%s) GROUP BY 1", (held,))}
            ns.heal("db")
            healed = time.monotonic()
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM portalq.job_queue WHERE status IN ('completed', 'failed')"
            ).fetchone()[0] == JOBS, 120, "every job final")
            rows = conn.execute("SELECT id, status, lock_owner FROM portalq.job_queue ORDER BY id"
                                ).fetchall()
            # what its rescued runs wrote after the rescue: an outcome written by "part"
            # after the rescue, with no new claim by "part" in between (it may rightly
            # claim and run the job again once it reaches the database)
            late = conn.execute("""
                SELECT e.job_id, e.at, e.to_status FROM portalq.job_events e
                JOIN LATERAL (SELECT min(r.at) AS at FROM portalq.job_events r WHERE r.job_id =
                              e.job_id AND r.detail->>'event' = 'rescued') r ON true
                WHERE e.worker = 'part' AND e.job_id = ANY(%s) AND e.from_status = 'running'
                  AND e.at > r.at AND NOT EXISTS (
                      SELECT 1 FROM portalq.job_events cl WHERE cl.job_id = e.job_id
                        AND cl.worker = 'part' AND cl.to_status = 'running'
                        AND cl.at > r.at AND cl.at < e.at)""", (held,)).fetchall()
            finishers = dict(conn.execute(
                "SELECT job_id, worker FROM portalq.job_events WHERE to_status = 'failed'"
            ).fetchall())
            reasons = [r[0] for r in conn.execute(
                "SELECT last_error FROM portalq.job_queue ORDER BY id")]
    finally:
        for svc in (part, b, c):
            if svc is not None:
                svc.stop()
    part_log = part.log()
    fenced = _log_times(part_log, "self-fencing")
    ledger = _ledger(base)
    per_job = collections.Counter(e["corporation_name"] for e in ledger)  # one name a job
    assert [r[1] for r in rows] == ["failed"] * JOBS, rows           # a person asked ...
    assert all("no page known to exist" in e or "may have been taken and paid" in e
               for e in reasons), reasons
    assert set(per_job.values()) == {1}                             # ... filed once at most
    assert all(f"Partition {i} LLC" in per_job for i in range(JOBS)
               if "no page known to exist" in reasons[i])               # those waited filed
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
          f"healed after {healed - cut:.1f}s; {len(held)} jobs moved, {len(ledger)} filed once")


def test_the_leaders_duties_move_when_it_is_partitioned_and_come_back(tmp_path, monkeypatch):
    why = netns.available()
    if why:
        pytest.skip(why)
    with netns.NetNs("pqlead", LEAD_NET) as ns, \
            _database(tmp_path, ns, LEAD_NET, monkeypatch) as (url, tcp_url, dsn):
        add_local_portal(dsn)   # a 24/7 portal and the ledger table
        add_local_portal(dsn, "other")
        _leader_scenario(tmp_path, ns, url, tcp_url, dsn)


def _leader_scenario(tmp_path, ns, url, tcp_url, dsn):
    from portalq.jobs import queue

    common = {"PORTALQ_WORKERS": 2, "PORTALQ_STALE_AFTER_SECONDS": STALE}
    part_ip, b_port = ns.ns_ip("db"), free_port()
    part = Service(tcp_url, tmp_path, "part", wrap=ns.cmd, PORTALQ_METRICS_PORT=PART_METRICS,
                   **common).start()
    b = None
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            def leader() -> list:
                return [r[0] for r in conn.execute(LEADER)]

            wait_until(lambda: leader() == [part_ip], 30, "part leads")
            # b's role is another portal: the jobs are part's to run, rescuing them b's duty
            b = Service(url, tmp_path, "b", PORTALQ_METRICS_PORT=b_port, PORTALQ_PORTALS="other",
                        **common).start()
            ids = [queue.enqueue("ledger_job", f"ORD-L{i}", {"sleep_ms": 3000}).id
                   for i in range(2)]
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM portalq.job_queue WHERE status = 'running' AND lock_owner = "
                "'part'").fetchone()[0] == 2, 30, "part runs both jobs")
            cut = time.monotonic()
            cut_at = datetime.now().astimezone()
            ns.partition("db")
            # the server drops the cut-off leader's session, b takes the lock at its tick
            wait_until(lambda: leader() == [None], 30, "b leads")
            moved_s = time.monotonic() - cut
            wait_until(lambda: conn.execute(
                "SELECT count(DISTINCT job_id) FROM portalq.job_events WHERE detail->>'event' = "
                "'rescued' AND job_id = ANY(%s)", (ids,)).fetchone()[0] == 2, 30,
                "part's jobs rescued")
            rescued_s = time.monotonic() - cut
            rescuers = {r[0] for r in conn.execute(
                "SELECT worker FROM portalq.job_events WHERE detail->>'event' = 'rescued' "
                "AND job_id = ANY(%s)", (ids,))}
            ns.heal("db")
            healed_at = time.time()
            # healed, part ticks again and leaves the duties with their live holder: the
            # ticks it began after the heal did none (the first to end after the heal may
            # have begun before it)
            ticks = _ns_ticks_since(ns, healed_at, 3)[1:]
            kept = leader()
            b_duties = health(b_port)["last_tick_summary"]
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM portalq.job_queue WHERE status = 'completed' AND id = ANY(%s)",
                (ids,)).fetchone()[0] == 2, 60, "part ran its jobs again")
            finishers = {r[0] for r in conn.execute(
                "SELECT worker FROM portalq.job_events WHERE to_status = 'completed'")}
            b.stop()                               # its session ends: the lock is free
            gone = time.monotonic()
            wait_until(lambda: leader() == [part_ip], 30, "part leads again")
            back_s = time.monotonic() - gone
            duties = wait_until(lambda: _ns_health(ns)["last_tick_summary"], 30,
                                "part's ticks do the duties again")
    finally:
        for svc in (part, b):
            if svc is not None:
                svc.stop()
    assert rescuers == {"b"}                       # b did the leader's duties ...
    assert finishers == {"part"}                   # ... part, healed, ran its jobs again
    assert kept == [None] and ticks == [{}, {}], ticks   # healed: not taken from b
    assert "rescued" in b_duties                   # while b still ran them
    assert "rescued" in duties                     # and part runs them again
    part_leads = _log_times(part.log(), "this node runs the maintenance tick")
    assert len(part_leads) == 2 and part_leads[0] < cut_at < part_leads[1], part_leads
    b_leads = _log_times(b.log(), "this node runs the maintenance tick")
    assert len(b_leads) == 1 and cut_at < b_leads[0] < part_leads[1], b_leads
    print(f"leader: duties moved {moved_s:.2f}s after the cut (stale time {STALE:.0f}s), "
          f"part's jobs rescued by the new leader {rescued_s:.2f}s after the cut, "
          f"back {back_s:.2f}s after the other node stopped")


def _ns_health(ns) -> dict:
    """part's /health, read inside its namespace (its metrics port is on its own lo)."""
    out = subprocess.run(ns.cmd([sys.executable, "-c", HEALTH]), capture_output=True,
                         text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def _ns_ticks_since(ns, since: float, n: int) -> list[dict]:
    """What part's first ``n`` ticks that ended after ``since`` (a time.time()) did, seen as
    changes of its /health ``last_tick``."""
    seen: list[dict] = []
    last = None

    def more() -> bool:
        nonlocal last
        state = _ns_health(ns)
        if state["last_tick"] and state["last_tick"] > since and state["last_tick"] != last:
            last = state["last_tick"]
            seen.append(state["last_tick_summary"])
        return len(seen) >= n

    wait_until(more, 60, f"{n} ticks of part after the heal", interval=0.2)
    return seen
