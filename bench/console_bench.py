"""The admin console at scale: server time of its pages with 1 million (and 10 million) job
rows, and claim throughput with ten consoles open versus none, same run.

    python bench/console_bench.py                       # 1,000,000 rows
    CONSOLE_ROWS=10000000 python bench/console_bench.py  # 10 million
    CONSOLE_REQUESTS=50 CONSOLE_CLAIM_JOBS=20000 python bench/console_bench.py

Data: generate_series rows in portalq's own embedded PostgreSQL (a scratch data directory
under the temp dir), ids rising with created_at over 30 days; 97 % completed, 1.5 %
cancelled, 0.8 % pending, 0.5 % failed, 0.2 % deferred; five portals and job types; a payload with a
legal_name. The rows are written at revision 0025 and then ``portalq migrate`` brings the
table to the head: migration 0026 builds the search's indexes over the full table (its time
is printed; the database's maintenance_work_mem is set to 256MB first, as a DBA would for a
large index build). Then VACUUM ANALYZE (the state autovacuum brings a table to).

The console runs as ``portalq console`` in a process of its own. Server time: its
``Server-Timing`` header (request in to response start, measured
inside the server: routing, session check, queries, template); p50/p99 of
CONSOLE_REQUESTS requests per page after 5 warm-ups, one client at a time.

Claim throughput: CONSOLE_CLAIM_JOBS pending jobs of an open 24/7 portal drained by one
claimer (claim 50, complete them, repeat; jobs.worker_api as the worker calls it), first
with no console open, then with ten consoles open (ten overview pages on the live stream,
each also loading the job list every 2 s), then with none again.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from portalq.jobs import worker_api  # noqa: E402

ROWS = int(os.environ.get("CONSOLE_ROWS", "1000000"))
REQUESTS = int(os.environ.get("CONSOLE_REQUESTS", "50"))
CLAIM_JOBS = int(os.environ.get("CONSOLE_CLAIM_JOBS", "20000"))
CLAIM_RUNS = int(os.environ.get("CONSOLE_CLAIM_RUNS", "3"))
DB = "portalq_console_bench"
PASSWORD = "bench password 123"


def server() -> Any:
    from portalq.jobs.db.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(Path(tempfile.gettempdir()) / "portalq-consolebench")
    pg.ensure_running()
    return pg


def reuse(pg: Any) -> tuple[str, int] | None:
    """CONSOLE_REUSE=1: the data of an earlier run with as many rows, if there is one."""
    if os.environ.get("CONSOLE_REUSE") != "1":
        return None
    dsn = pg.dsn(DB)
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            # made at the head's schema (job_search, migration 0026), not an earlier one
            indexed = c.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'portalq' "
                                "AND indexname LIKE 'job_search\\_%%'").fetchone()[0]
            if not indexed:
                return None
            n = c.execute("SELECT count(*) FROM portalq.job_queue WHERE order_id LIKE 'ORD-%%' "
                          "AND order_id <> 'ORD-PAGE'").fetchone()[0]
            job = c.execute("SELECT id FROM portalq.job_queue "
                            "WHERE order_id = 'ORD-PAGE'").fetchone()
            c.execute("DELETE FROM portalq.job_queue WHERE order_id LIKE 'CLAIM-%%'")
            c.execute("DELETE FROM portalq.console_users")
            c.execute("VACUUM ANALYZE portalq.job_queue, portalq.job_search")
    except psycopg.OperationalError:
        return None
    return (dsn, job[0]) if n == ROWS and job and indexed else None


def prepare(pg: Any) -> tuple[str, int]:
    from portalq.jobs.db.migrate import upgrade
    from portalq.scheduler.calendar_cache import store_holidays

    again = reuse(pg)
    if again:
        print(f"data: reusing the {ROWS:,} rows of an earlier run", file=sys.stderr)
        return again
    with psycopg.connect(pg.dsn("postgres"), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{DB}"')
    dsn = pg.dsn(DB)
    url = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    upgrade(url, "0025")   # the search's indexes are built over the full table (below)
    store_holidays(url)
    start = datetime.now(UTC) - timedelta(days=30)
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("""INSERT INTO portalq.portals (code, name, timezone) VALUES
                     ('benchq', 'bench', 'UTC') ON CONFLICT DO NOTHING""")
        c.execute("DELETE FROM portalq.portal_hours WHERE portal = 'benchq'")
        c.execute("""INSERT INTO portalq.portal_hours (portal, weekday, opens, closes)
                     SELECT 'benchq', d, '00:00', '00:00' FROM generate_series(0, 6) d""")
        c.execute("UPDATE portalq.portals SET max_concurrent_sessions = NULL WHERE code = 'benchq'")
        step = 1_000_000
        for lo in range(1, ROWS + 1, step):
            hi = min(lo + step - 1, ROWS)
            c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, priority,
                                   run_at, attempts, created_at, updated_at, finished_at,
                                   last_error)
            SELECT (ARRAY['name_search', 'file_entity', 'obtain_ein', 'process_crtc',
                          'deliver'])[1 + g %% 5],
                   'ORD-' || g,
                   (ARRAY['bc_corporate_online', 'delaware_icis', 'irs_ein', 'crtc',
                          'email'])[1 + g %% 5],
                   jsonb_build_object('legal_name', 'Company ' || g || ' Ltd.', 'state', 'DE'),
                   s.status, 0, ts, 1, ts, ts,
                   CASE WHEN s.status IN ('completed', 'failed', 'cancelled')
                        THEN ts + interval '2 minutes' END,
                   CASE WHEN s.status = 'failed' THEN 'portal said no' END
            FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g,
                 LATERAL (SELECT %(start)s::timestamptz
                                 + (g::float8 / %(n)s) * interval '30 days' AS ts) t,
                 LATERAL (SELECT CASE WHEN g %% 1000 < 970 THEN 'completed'
                                      WHEN g %% 1000 < 975 THEN 'failed'
                                      WHEN g %% 1000 < 990 THEN 'cancelled'
                                      WHEN g %% 1000 < 998 THEN 'pending'
                                      ELSE 'deferred' END AS status) s
            """, {"lo": lo, "hi": hi, "n": ROWS, "start": start})
            print(f"  {hi:,} rows ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        # the job page's job: a real obtain_ein payload (with an SSN), events, escalation
        from portalq.jobs import queue
        from tests import payloads

        job = queue.enqueue("obtain_ein", "ORD-PAGE", {**payloads.OBTAIN_EIN,
                            "applicant": "responsible_party"}, conn=c).id
        c.execute("""INSERT INTO portalq.job_events (job_id, at, attempt, from_status, to_status)
                     SELECT %s, now(), g, 'pending', 'running' FROM generate_series(1, 10) g""",
                  (job,))
        print(f"data: {ROWS:,} rows in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        c.execute(f'ALTER DATABASE "{DB}" SET maintenance_work_mem = \'256MB\'')
        t1 = time.perf_counter()
        upgrade(url)
        print(f"migration 0026 (portal, job type indexes, job_search filled, its 4 trigram "
              f"indexes) over {ROWS:,} rows: "
              f"{time.perf_counter() - t1:.0f} s", file=sys.stderr)
        c.execute("VACUUM ANALYZE portalq.job_queue, portalq.job_search")
    return dsn, job


class Client:
    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[float, bytes]:
        with self.opener.open(self.base + path, timeout=60) as r:
            body = r.read()
            timing = r.headers["Server-Timing"]
        return float(timing.split("dur=")[1]), body

    def sign_in(self, name: str) -> None:
        self.get("/login")
        token = next(c.value for c in self.jar if c.name == "csrftoken")
        data = urllib.parse.urlencode({"csrftoken": token, "name": name,
                                       "password": PASSWORD}).encode()
        with self.opener.open(self.base + "/login", data=data, timeout=30) as r:
            assert r.status == 200 and "/login" not in r.url, r.url


def start_console(dsn: str) -> tuple[Any, str]:
    """``portalq console`` in a process of its own, as it runs in production."""
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PORTALQ_DATABASE_URL": dsn, "PORTALQ_CONSOLE_PORT": str(port),
           "PORTALQ_CONSOLE_SECRET": "bench-secret-" + "y" * 20,
           "PORTALQ_CONSOLE_LOGIN_FAILURES_PER_IP": "10000"}
    proc = subprocess.Popen([sys.executable, "-m", "portalq", "console"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/login", timeout=2).read()
            return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the console did not start") from None
            time.sleep(0.1)


def pages(dsn: str, job: int, base: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as c:
        lo, hi = c.execute("SELECT min(created_at), max(created_at) "
                           "FROM portalq.job_queue").fetchone()
        mid = lo + (hi - lo) / 2
    span = (mid.strftime("%Y-%m-%dT%H:%M"),
            (mid + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M"))
    client = Client(base)
    client.sign_in("bench")
    _, first = client.get("/jobs")
    before = first.decode().split("/jobs?before=")[1].split('"')[0]
    return [
        ("overview", "/"),
        ("jobs, no filter", "/jobs"),
        ("jobs, no filter, page 2 (keyset)", f"/jobs?before={before}"),
        ("jobs, status=failed", "/jobs?status=failed"),
        ("jobs, status=pending, portal=crtc", "/jobs?status=pending&portal=crtc"),
        ("jobs, job_type=obtain_ein", "/jobs?job_type=obtain_ein"),
        ("jobs, portal=crtc", "/jobs?portal=crtc"),
        ("jobs, order id", "/jobs?order_id=ORD-" + str(ROWS // 2)),
        ("jobs, 6 h time range", f"/jobs?created_from={span[0]}&created_to={span[1]}"),
        # the first job of all: 1 match, the oldest row (trigram index)
        ("jobs, legal_name contains 'company 17 ltd'",
         "/jobs?field=legal_name&value=company+17+ltd"),
        # 'Company 4242 Ltd.', 'Company 42420..', ...: none in the newest window (index)
        ("jobs, legal_name contains 'company 4242'", "/jobs?field=legal_name&value=company+4242"),
        # a common text: the id window fills the page
        ("jobs, legal_name contains 'ltd'", "/jobs?field=legal_name&value=ltd"),
        # a field without an index: one id window, the search says where it stopped
        ("jobs, state contains 'xx' (1 window)", "/jobs?field=state&value=xx"),
        ("job page", f"/jobs/{job}"),
    ], client


def measure(client: Client, path: str) -> tuple[float, float]:
    for _ in range(5):
        client.get(path)
    times = sorted(client.get(path)[0] for _ in range(REQUESTS))
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times), p99


async def drain(dsn: str, n: int) -> float:
    from psycopg import AsyncConnection

    async with await AsyncConnection.connect(dsn, autocommit=True) as c:
        await c.execute("""
            INSERT INTO portalq.job_queue (job_type, order_id, portal, payload, status, run_at,
                                   created_at, updated_at)
            SELECT 'deliver', 'CLAIM-' || g, 'benchq',
                   -- a searchable field (job_search's row written once, at this insert)
                   jsonb_build_object('legal_name', 'Claim ' || g || ' Holdings Ltd.'),
                   'pending', now(), now(), now()
            FROM generate_series(1, %s) g""", (n,))
        caps = [worker_api.Capacity("benchq", None)]
        done = 0
        t0 = time.perf_counter()
        while done < n:
            jobs = await worker_api.claim(c, worker="bench", capacities=caps, limit=50)
            if not jobs:
                break
            await worker_api.complete_many(c, worker="bench",
                                           results=[(j["id"], None) for j in jobs])
            done += len(jobs)
        return done / (time.perf_counter() - t0)


def overview_compute(dsn: str) -> None:
    """What the overview's numbers cost the console process (computed once per refresh
    period, shared by every open page): the first (the 24 h chart counted whole) and a
    refresh (past hours cached)."""
    from portalq.scheduler.console.pages_overview import compute

    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as c:
        first, refresh = [], []
        for _ in range(max(3, REQUESTS // 10)):
            cache: dict[Any, Any] = {}
            t0 = time.perf_counter()
            compute(c, cache)
            first.append((time.perf_counter() - t0) * 1000)
            for _ in range(3):
                t0 = time.perf_counter()
                compute(c, cache)
                refresh.append((time.perf_counter() - t0) * 1000)
    print(f"  {'overview numbers, first (24 h counted)':<48} "
          f"{statistics.median(first):7.1f} / {max(first):7.1f} (median / max)")
    print(f"  {'overview numbers, a refresh (past hours cached)':<48} "
          f"{statistics.median(refresh):7.1f} / {max(refresh):7.1f} (median / max)")


class Consoles:
    """Ten open consoles: each on the live stream, and loading the job list every 2 s."""

    def __init__(self, base: str, n: int = 10) -> None:
        self.base, self.n = base, n
        self.stop = threading.Event()
        self.events = 0
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> Consoles:
        for _ in range(self.n):
            client = Client(self.base)
            client.sign_in("bench")
            self.threads += [threading.Thread(target=self._stream, args=(client,), daemon=True),
                             threading.Thread(target=self._browse, args=(client,), daemon=True)]
        for t in self.threads:
            t.start()
        return self

    def _stream(self, client: Client) -> None:
        with client.opener.open(self.base + "/events", timeout=120) as r:
            while not self.stop.is_set():
                line = r.readline()
                if not line:
                    return
                if line.startswith(b"event: overview"):
                    self.events += 1

    def _browse(self, client: Client) -> None:
        while not self.stop.wait(2.0):
            client.get("/jobs")

    def __exit__(self, *exc: object) -> None:
        self.stop.set()


def main() -> None:
    pg = server()
    print(f"generating {ROWS:,} rows ...", file=sys.stderr)
    dsn, job = prepare(pg)
    from portalq.jobs.admin import users as console_users

    with psycopg.connect(dsn, autocommit=True) as c:
        console_users.add_user(c, "bench", "admin", PASSWORD)
    srv, base = start_console(dsn)
    try:
        targets, client = pages(dsn, job, base)
        print(f"\nconsole server time, {ROWS:,} job rows, {REQUESTS} requests each "
              f"(p50 / p99 ms)")
        for label, path in targets:
            p50, p99 = measure(client, path)
            print(f"  {label:<48} {p50:7.1f} / {p99:7.1f}")
        asyncio.run(drain(dsn, CLAIM_JOBS // 4))  # warm-up
        overview_compute(dsn)
        rates: dict[str, list[float]] = {"no console": [], "ten consoles": []}
        events = 0
        for _ in range(CLAIM_RUNS):
            rates["no console"].append(asyncio.run(drain(dsn, CLAIM_JOBS)))
            with Consoles(base) as open_consoles:
                time.sleep(1)
                rates["ten consoles"].append(asyncio.run(drain(dsn, CLAIM_JOBS)))
                events += open_consoles.events
        print(f"\nclaim throughput, {CLAIM_JOBS:,} jobs per run, {CLAIM_RUNS} runs each, "
              "alternating (median (min-max) jobs/s)")
        for label, values in rates.items():
            print(f"  {label:<14} {statistics.median(values):8,.0f} "
                  f"({min(values):,.0f}-{max(values):,.0f})")
        ratio = statistics.median(rates["ten consoles"]) / statistics.median(rates["no console"])
        print(f"  ratio ten consoles / none: {ratio:.2f}  ({events} live updates received by "
              "the open consoles)")
    finally:
        srv.terminate()
        srv.wait(20)


if __name__ == "__main__":
    main()
