"""Enqueue: atomic with the caller's transaction, idempotent under races, validated."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from portalq.jobs import queue, types
from portalq.jobs.errors import InputError
from portalq.portals.bc.payload import NameSearchPayload
from tests import payloads

# name_search that may also be sent to the portals these tests name, so what answers an
# unknown one is the database's portal check (name_search itself refuses any other portal)
ANYWHERE = types.register(types.JobType("name_search_anywhere", NameSearchPayload,
                                        "bc_corporate_online", other_portals=("moon", "tmp")))


def count_jobs(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0]


def test_enqueue_in_rolled_back_session_leaves_no_job(db, conn):
    engine = create_engine(db)
    with Session(engine) as session:
        session.execute(text("CREATE TABLE orders (id text primary key)"))
        session.commit()
        session.execute(text("INSERT INTO orders VALUES ('ORD-1')"))
        queue.enqueue("name_search", "ORD-1", payloads.NAME_SEARCH, conn=session)
        # visible inside the caller's transaction ...
        assert session.execute(text("SELECT count(*) FROM portalq.job_queue")).scalar() == 1
        session.rollback()
    # ... gone with it, together with the business write
    assert count_jobs(conn) == 0
    assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM portalq.job_events").fetchone()[0] == 0
    engine.dispose()


def test_enqueue_in_committed_connection_creates_exactly_one(db, conn):
    engine = create_engine(db)
    with engine.begin() as c:
        c.execute(text("CREATE TABLE orders (id text primary key)"))
    with engine.begin() as c:
        c.execute(text("INSERT INTO orders VALUES ('ORD-2')"))
        job = queue.enqueue("name_search", "ORD-2", payloads.NAME_SEARCH, conn=c)
    row = conn.execute("SELECT id, status, order_id, portal, attempts, max_attempts "
                       "FROM portalq.job_queue").fetchall()
    assert row == [(job.id, "pending", "ORD-2", "bc_corporate_online", 0, 5)]
    # the job row is its own creation record: the history shows it, no event row is written
    assert conn.execute("SELECT count(*) FROM portalq.job_events").fetchone()[0] == 0
    history = queue.show_job(job.id)["events"]
    assert [(e["from_status"], e["to_status"], e["detail"]) for e in history] == [
        (None, "pending", {"event": "enqueued"})]
    assert history[0]["at"] == queue.get_job(job.id)["created_at"]
    engine.dispose()


def test_notification_only_on_commit(dsn, conn):
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN portalq_jobs")
        with psycopg.connect(dsn) as writer:
            queue.enqueue("name_search", "ORD-3", payloads.NAME_SEARCH, conn=writer)
            writer.rollback()
        assert list(listener.notifies(timeout=0.2, stop_after=1)) == []
        with psycopg.connect(dsn) as writer:
            queue.enqueue("name_search", "ORD-3", payloads.NAME_SEARCH, conn=writer)
            writer.commit()
        got = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in got] == ["portalq_jobs"]


def test_concurrent_enqueues_with_one_idempotency_key_create_one_job(dsn, conn):
    barrier = threading.Barrier(8)
    results: list[queue.Enqueued] = []
    errors: list[BaseException] = []

    def racer() -> None:
        try:
            with psycopg.connect(dsn) as c:
                barrier.wait(timeout=10)
                results.append(queue.enqueue("name_search", "ORD-4", payloads.NAME_SEARCH,
                                             idempotency_key="order-4-name", conn=c))
                c.commit()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert count_jobs(conn) == 1
    assert len({r.id for r in results}) == 1
    assert sorted(r.created for r in results) == [False] * 7 + [True]


def test_batch_enqueue_keeps_order_and_dedupes(conn, db):
    existing = queue.enqueue("name_search", "ORD-5", payloads.NAME_SEARCH, idempotency_key="k1")
    jobs = [queue.NewJob("name_search", f"ORD-{i}", payloads.NAME_SEARCH,
                         idempotency_key=("k1" if i == 3 else None), priority=i % 3)
            for i in range(10)]
    out = queue.enqueue_many(jobs)
    assert len(out) == 10
    assert out[3] == queue.Enqueued(existing.id, False)
    assert all(o.created for i, o in enumerate(out) if i != 3)
    orders = dict(conn.execute("SELECT id, order_id FROM portalq.job_queue").fetchall())
    assert [orders[o.id] for i, o in enumerate(out) if i != 3] == [
        f"ORD-{i}" for i in range(10) if i != 3]


@pytest.mark.parametrize("job_type, payload, message", [
    ("nope", {}, "unknown job type 'nope'"),
    ("name_search", {"names": []}, "invalid name_search payload: names"),
    ("obtain_ein", {**payloads.OBTAIN_EIN, "responsible_party": {
        "first_name": "A", "last_name": "B"}}, "needs an SSN or an ITIN"),
    ("obtain_ein", {**payloads.OBTAIN_EIN, "start_month": 13},
     "invalid obtain_ein payload: start_month"),
    ("file_entity", {**payloads.FILE_ENTITY_BC, "jurisdiction": "ZZ"},
     "invalid file_entity payload: jurisdiction"),
    ("file_entity", {**payloads.FILE_ENTITY_BC, "entity_type": "LLC"},
     "a BC filing is one of BC_COMPANY, ULC, not LLC"),
])
def test_invalid_input_writes_nothing(conn, db, job_type, payload, message):
    batch = [queue.NewJob("name_search", "ORD-OK", payloads.NAME_SEARCH),
             queue.NewJob(job_type, "ORD-BAD", payload)]
    with pytest.raises(InputError, match=message):
        queue.enqueue_many(batch)
    assert count_jobs(conn) == 0


def test_empty_idempotency_key_rejected_and_unknown_portal_wins_over_a_known_key(conn, db):
    with pytest.raises(InputError, match="idempotency key must not be empty"):
        queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, idempotency_key=" ")
    first = queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, idempotency_key="k")
    # same answer for one job as for a batch: an unknown portal is an error, key or not
    for enqueue in (lambda **kw: queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, **kw),
                    lambda **kw: queue.enqueue_many([
                        queue.NewJob("name_search_anywhere", "O", payloads.NAME_SEARCH, **kw),
                        queue.NewJob("name_search_anywhere", "P", payloads.NAME_SEARCH)])[0]):
        with pytest.raises(InputError, match="unknown portal 'moon'"):
            enqueue(idempotency_key="k", portal="moon")
        assert enqueue(idempotency_key="k") == queue.Enqueued(first.id, False)
    assert count_jobs(conn) == 2   # the first one, and "P" of the batch


def test_unknown_portal_and_naive_run_at_rejected(conn, db):
    with pytest.raises(InputError, match="unknown portal 'moon'"):
        queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, portal="moon")
    with pytest.raises(InputError, match="timezone"):
        queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, run_at=datetime(2026, 1, 1))
    assert count_jobs(conn) == 0


# INSERT path, COPY path, COPY path with the bad job after the rows checked first
@pytest.mark.parametrize("size", [2, queue.COPY_MIN, 3 * queue.COPY_MIN])
def test_unknown_portal_in_a_batch_writes_nothing(conn, db, size):
    batch = [queue.NewJob("name_search_anywhere", f"ORD-{i}", payloads.NAME_SEARCH)
             for i in range(size - 1)]
    batch.append(queue.NewJob("name_search_anywhere", "ORD-BAD", payloads.NAME_SEARCH, portal="moon"))
    with pytest.raises(InputError, match="unknown portal 'moon'"):
        queue.enqueue_many(batch)
    assert count_jobs(conn) == 0


def test_large_batch_is_copied_with_every_field_and_ids_in_order(conn, db, dsn):
    """A batch without idempotency keys goes through COPY: same rows as the INSERT path."""
    when = datetime(2026, 12, 1, 15, tzinfo=UTC)
    jobs = [queue.NewJob("obtain_ein" if i % 2 else "name_search", f"ORD-{i}",
                         payloads.OBTAIN_EIN if i % 2 else payloads.NAME_SEARCH,
                         priority=i % 5, max_attempts=1 + i % 7,
                         run_at=when if i % 3 == 0 else None)
            for i in range(3 * queue.COPY_MIN)]
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN portalq_jobs")
        out = queue.enqueue_many(jobs)
        assert len(list(listener.notifies(timeout=5, stop_after=1))) == 1
    assert all(o.created for o in out)
    assert [o.id for o in out] == sorted(o.id for o in out)
    rows = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, job_type, order_id, portal, status, priority, max_attempts, run_at, "
        "payload, rate_key IS NOT NULL, created_at = updated_at FROM portalq.job_queue")}
    assert len(rows) == len(jobs)
    for o, j in zip(out, jobs, strict=True):
        job_type, order_id, portal, status, prio, attempts, run_at, payload, keyed, same = rows[o.id]
        assert (job_type, order_id, status, prio, attempts, same) == (
            j.job_type, j.order_id, "pending", j.priority, j.max_attempts, True)
        assert portal == ("irs_ein" if j.job_type == "obtain_ein" else "bc_corporate_online")
        assert keyed == (j.job_type == "obtain_ein")          # the hashed SSN rate key
        assert payload["names" if j.job_type == "name_search" else "legal_name"]
        if j.run_at is not None:
            assert run_at == when
    # a later single enqueue continues the same id sequence
    assert queue.enqueue("name_search", "ORD-X", payloads.NAME_SEARCH).id > max(rows)


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_portal_first_named_late_in_a_large_batch_is_checked_and_written(conn, db, dsn,
                                                                           autocommit):
    """The COPY is written while the batch is validated; a portal that the rows checked
    first did not name is checked too (the batch then written after all)."""
    n = 3 * queue.COPY_MIN
    jobs = [queue.NewJob("obtain_ein" if i >= n - 3 else "name_search", f"ORD-{i}",
                         payloads.OBTAIN_EIN if i >= n - 3 else payloads.NAME_SEARCH)
            for i in range(n)]
    with psycopg.connect(dsn, autocommit=autocommit) as c:
        out = queue.enqueue_many(jobs, conn=c)
        c.commit()
    assert [o.id for o in out] == sorted(o.id for o in out) and all(o.created for o in out)
    portals = dict(conn.execute("SELECT id, portal FROM portalq.job_queue").fetchall())
    assert [portals[o.id] for o in out] == ["bc_corporate_online"] * (n - 3) + ["irs_ein"] * 3


def test_a_portal_seen_in_a_rolled_back_transaction_block_is_checked_again(conn, db, dsn):
    """The portals an autocommit connection has seen are remembered only outside a
    transaction block: one created inside a block that rolls back does not exist."""
    with psycopg.connect(dsn, autocommit=True) as c:
        with pytest.raises(RuntimeError), c.transaction():
            c.execute("INSERT INTO portalq.portals (code, name, timezone) VALUES ('moon', 'Moon', 'UTC')")
            queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, portal="moon",
                          conn=c)
            raise RuntimeError("the business's own write failed")
        with pytest.raises(InputError, match="unknown portal 'moon'"):
            queue.enqueue("name_search_anywhere", "O", payloads.NAME_SEARCH, portal="moon",
                          conn=c)
    assert count_jobs(conn) == 0


def test_the_batch_copy_stores_each_row_as_it_arrives(conn, dsn):
    """issue 19: the server used to buffer a binary COPY's rows for one multi-row insert per
    1,000, so a batch of up to 1,000 was stored only after its last row and the client's
    work and the server's never overlapped. Seen from another session: the first row's id
    is in the primary key while the COPY is still being written (a row with the same id
    waits for the COPY's transaction), not only once the COPY ends."""
    from portalq.jobs.db import sql
    from portalq.jobs.enqueue_paths import copy_columns

    now = datetime(2026, 12, 1, 15, tzinfo=UTC)
    columns = copy_columns()

    def row(i: int) -> tuple:
        return columns.values({
            "id": i, "job_type": "name_search", "order_id": "ORD-1",
            "portal": "bc_corporate_online", "payload": "{}", "status": "pending",
            "priority": 0, "run_at": now, "max_attempts": 5, "rate_key": None,
            "created_at": now, "updated_at": now, "secret_key_id": None, "secret_dek": None,
            "secret_data": None})

    with psycopg.connect(dsn, autocommit=True) as c, \
            psycopg.connect(dsn, autocommit=True) as other:
        ids = sql.fetch_value(c, "next_job_ids", {"n": 600})
        other.execute("SET lock_timeout = '300ms'")
        seen: list[str] = []

        def rows():
            for k, i in enumerate(ids):
                yield row(i)
                if k == 500:   # several blocks sent: the server has the first row
                    seen.append(stored_first(ids[0]))

        def stored_first(first: int) -> str:
            for _ in range(1000):   # up to 10 s for the server to store a row
                done = other.execute(
                    "SELECT tuples_processed FROM pg_stat_progress_copy WHERE pid = %s",
                    (c.info.backend_pid,)).fetchone()
                if done and done[0] >= 1:
                    break
                threading.Event().wait(0.01)
            else:
                return "no row stored yet"
            try:
                sql.copy_in(other, "enqueue_copy", columns.types, [row(first)], json_text=True)
                return "the same id stored apart"
            except psycopg.errors.LockNotAvailable:
                return "waited"

        sql.copy_in(c, "enqueue_copy", columns.types, rows(), json_text=True)
    assert seen == ["waited"]
    assert count_jobs(conn) == 600


def test_a_large_batch_reaches_the_server_in_small_blocks(conn, dsn):
    """issue 19: psycopg sends a COPY's rows in blocks of 32 KiB (about 250 jobs), so once
    the client had made its last row the server still had a whole block to store before
    the commit, and the next batch waited for it. Seen in the protocol: every CopyData
    message is at most one block of ``enqueue_paths.COPY_BLOCK`` bytes and a row."""
    import tempfile

    from portalq.jobs import enqueue_paths

    with psycopg.connect(dsn, autocommit=True) as c, tempfile.TemporaryFile("w+") as f:
        c.pgconn.trace(f.fileno())
        c.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        queue.enqueue_many([queue.NewJob("name_search", f"ORD-{i}", payloads.NAME_SEARCH)
                            for i in range(1000)], conn=c)
        c.pgconn.untrace()
        f.seek(0)
        sizes = [int(parts[1]) for parts in (ln.split("\t") for ln in f)
                 if len(parts) > 2 and parts[0] == "F" and parts[2].startswith("CopyData")]
    assert count_jobs(conn) == 1000
    row = sum(sizes) / 1000
    assert enqueue_paths.COPY_BLOCK <= 4096
    assert max(sizes) <= enqueue_paths.COPY_BLOCK + 2 * row, sizes[:3]
    assert len(sizes) >= sum(sizes) // (enqueue_paths.COPY_BLOCK + 2 * row)


def test_the_copy_writes_each_column_as_the_table_types_it(conn):
    """The batch COPY's columns are its statement's (queries.sql, enqueue_copy), each typed
    by its name in ``enqueue_paths.COPY_COLUMN_TYPES``: those types are the table's."""
    from portalq.jobs.enqueue_paths import copy_columns

    table = dict(conn.execute(
        "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = 'portalq.job_queue'::regclass AND a.attnum > 0 "
        "AND NOT a.attisdropped").fetchall())
    columns = copy_columns()
    assert len(columns.names) == 15 and "id" in columns.names
    assert dict(zip(columns.names, columns.types, strict=True)) == {
        n: table[n] for n in columns.names}


# run in a fresh interpreter: every psycopg module loaded first, its attributes noted,
# then portalq imported and a job and a COPY batch enqueued, then compared
_PSYCOPG_UNTOUCHED = """
import importlib, json, pkgutil, sys
import psycopg
for m in pkgutil.walk_packages(psycopg.__path__, "psycopg."):
    try:
        importlib.import_module(m.name)
    except ImportError:   # an optional part (e.g. a driver extra) not installed
        pass

def snapshot():
    return {name: dict(vars(mod)) for name, mod in list(sys.modules.items())
            if name.split(".")[0] in ("psycopg", "psycopg_c", "psycopg_binary", "psycopg_pool")}

before = snapshot()
from portalq.jobs import queue
payload = json.loads(sys.argv[2])
with psycopg.connect(sys.argv[1], autocommit=True) as c:
    queue.enqueue("name_search", "ORD-1", payload, conn=c)
    queue.enqueue_many([queue.NewJob("name_search", f"ORD-{i}", payload)
                        for i in range(2 * queue.COPY_MIN)], conn=c)
after = snapshot()
missing = object()
print(sorted(f"{m}.{k}" for m, attrs in before.items() for k in attrs.keys() | after[m].keys()
             if attrs.get(k, missing) is not after[m].get(k, missing)))
"""


def test_importing_and_enqueueing_leave_psycopg_as_it_was(conn, dsn):
    """portalq shares psycopg with the business's own application when it enqueues
    in-process: importing portalq and enqueueing (one job; a batch through COPY) changes no
    attribute of any psycopg module."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PSYCOPG_UNTOUCHED, dsn,
                          json.dumps(payloads.NAME_SEARCH)],
                         capture_output=True, text=True, cwd="/", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
    assert count_jobs(conn) == 1 + 2 * queue.COPY_MIN


def test_large_batch_in_a_rolled_back_transaction_leaves_nothing(conn, dsn):
    with psycopg.connect(dsn) as c:
        queue.enqueue_many([queue.NewJob("name_search", f"ORD-{i}", payloads.NAME_SEARCH)
                            for i in range(queue.COPY_MIN)], conn=c)
        assert c.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == queue.COPY_MIN
        c.rollback()
    assert count_jobs(conn) == 0


def test_every_builtin_type_routes_to_its_portal(conn, db):
    expected = {"name_search": "bc_corporate_online", "obtain_ein": "irs_ein",
                "file_entity": "bc_corporate_online", "process_crtc": "crtc",
                "deliver": "email"}
    for job_type, payload in payloads.ALL.items():
        job = queue.enqueue(job_type, "ORD-R", payload)
        assert queue.get_job(job.id)["portal"] == expected[job_type]
    de = queue.enqueue("file_entity", "ORD-DE", payloads.FILE_ENTITY_DE)
    assert queue.get_job(de.id)["portal"] == "delaware_icis"


def test_rate_key_is_hashed_not_the_ssn(conn, db):
    job = queue.enqueue("obtain_ein", "ORD-E", payloads.OBTAIN_EIN,
                        run_at=datetime(2026, 12, 1, tzinfo=UTC))
    key = conn.execute("SELECT rate_key FROM portalq.job_queue WHERE id = %s", (job.id,)).fetchone()[0]
    assert key and "6789" not in key


def test_portals_are_never_deleted_or_renamed(conn, db):
    """Jobs name their portal by code; a retired portal is disabled instead."""
    for sql in ("DELETE FROM portalq.portals WHERE code = 'crtc'",
                "UPDATE portalq.portals SET code = 'crtc2' WHERE code = 'crtc'",
                "TRUNCATE portalq.portals CASCADE"):
        with pytest.raises(psycopg.errors.RestrictViolation, match="never deleted or renamed"):
            conn.execute(sql)
        conn.rollback()
    conn.execute("UPDATE portalq.portals SET enabled = false WHERE code = 'crtc'")


def test_a_portal_created_in_a_rolled_back_transaction_stays_unknown(dsn, conn):
    """An autocommit connection remembers the portals it saw exist (they never go away);
    one inside a transaction does not: the portal may be that transaction's own."""
    with psycopg.connect(dsn) as c:
        c.execute("INSERT INTO portalq.portals (code, name, timezone) VALUES ('tmp', 'tmp', 'UTC')")
        queue.enqueue("name_search_anywhere", "O-1", payloads.NAME_SEARCH, portal="tmp", conn=c)
        c.rollback()
        with pytest.raises(InputError, match="unknown portal 'tmp'"):
            queue.enqueue("name_search_anywhere", "O-2", payloads.NAME_SEARCH, portal="tmp", conn=c)
    with psycopg.connect(dsn, autocommit=True) as c:
        first = queue.enqueue("name_search", "O-3", payloads.NAME_SEARCH, conn=c)
        again = queue.enqueue("name_search", "O-4", payloads.NAME_SEARCH, conn=c)  # unchecked
        with pytest.raises(InputError, match="unknown portal 'tmp'"):
            queue.enqueue("name_search_anywhere", "O-5", payloads.NAME_SEARCH, portal="tmp", conn=c)
        assert again.id == first.id + 1
    assert count_jobs(conn) == 2
