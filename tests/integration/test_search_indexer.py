"""The console search's indexer (issue 49.1): an enqueue writes no ``job_search`` row; the
indexer fills it in batches from the queue's own ids, behind a high-water mark that never
passes a job still being enqueued by a transaction in flight, and a rebuild starts it over.
The console's search finds the jobs above the mark (not indexed yet) as well."""

from __future__ import annotations

import asyncio
import contextlib
import time

import psycopg

from portalq.jobs import queue, search_index
from portalq.jobs.admin import reads as console_repo
from portalq.jobs.admin.reads import JobFilter
from tests import payloads
from tests.conftest import run_cli


def _indexed(c) -> list[int]:
    return [r[0] for r in c.execute("SELECT job_id FROM portalq.job_search ORDER BY 1")]


def _named(name: str, c) -> int:
    return queue.enqueue("file_entity", f"ORD-{name}", {**payloads.FILE_ENTITY_DE,
                                                        "legal_name": name}, conn=c).id


def test_the_enqueue_writes_no_search_row_the_indexer_does(conn):
    a = _named("Alder Holdings LLC", conn)
    b = queue.enqueue("deliver", "ORD-D", payloads.DELIVER, conn=conn).id  # no searched field
    c = _named("Birch 987-65-4321 Trust", conn)
    assert _indexed(conn) == []     # nothing written by the enqueue's own transaction
    # not indexed yet: the search still finds them (tested on the queue above the mark)
    assert [r["id"] for r in console_repo.jobs_page(conn, JobFilter(
        field="legal_name", value="alder hold"), before_id=a + 1, window=1).rows] == [a]
    done = search_index.step(conn)
    assert done.indexed_to == c and search_index.mark(conn).indexed_to == c
    assert _indexed(conn) == [a, c] and b not in _indexed(conn)
    # masked as the pages show it
    assert conn.execute("SELECT legal_name FROM portalq.job_search WHERE job_id = %s",
                        (c,)).fetchone()[0] == "Birch *** Trust"
    # indexed: the index's search finds it, below a window of one row
    assert [r["id"] for r in console_repo.jobs_page(conn, JobFilter(
        field="legal_name", value="alder hold"), before_id=a + 1, window=1).rows] == [a]
    assert search_index.step(conn).indexed_to == c   # nothing new: the mark stays


def test_the_mark_waits_for_a_job_enqueued_by_a_transaction_in_flight(conn, dsn):
    first = _named("Cedar One Ltd.", conn)
    with psycopg.connect(dsn) as slow:   # a transaction that took its id and has not committed
        late = _named("Dogwood Late Ltd.", slow)
        after = _named("Elm After Ltd.", conn)
        assert late < after
        assert search_index.step(conn).indexed_to == first   # not past the job in flight
        assert search_index.step(conn).indexed_to == first
        slow.commit()
    # committed: the mark moves over it and both are indexed
    assert search_index.step(conn).indexed_to == after
    assert _indexed(conn) == [first, late, after]


def test_a_rolled_back_id_is_passed_once_its_transactions_are_over(conn, dsn):
    first = _named("Fir One Ltd.", conn)
    with psycopg.connect(dsn) as gone:
        _named("Ghost Rolled Back Ltd.", gone)
        after = _named("Hazel After Ltd.", conn)
        assert search_index.step(conn).indexed_to == first
        gone.rollback()
    # the id that will never be written: passed after the settling time, not before
    assert search_index.step(conn, settle_seconds=3600).indexed_to == first
    # ripe: passed at once if no transaction runs on the server; else the step notes those
    # running (other tests' databases share the server) and passes it once they are over
    if search_index.step(conn, settle_seconds=0).indexed_to != after:
        _until_over_on_the_server(conn)
        assert search_index.step(conn, settle_seconds=0).indexed_to == after
    assert _indexed(conn) == [first, after]


def _until_over_on_the_server(conn) -> None:
    """Wait until every transaction the indexer noted at the gap is over: the condition
    the indexer waits for, read on the server (not a guess of how long they take)."""
    deadline = time.monotonic() + 60
    while not conn.execute(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= pending_xmax "
            "FROM portalq.job_search_mark").fetchone()[0]:
        conn.commit()
        assert time.monotonic() < deadline, "a transaction on the server ran for a minute"
        time.sleep(0.05)
    conn.commit()


def test_batches_and_a_rebuild(conn):
    ids = [_named(f"Juniper {i} Ltd.", conn) for i in range(7)]
    assert search_index.step(conn, limit=3).indexed_to == ids[2]
    assert search_index.catch_up(conn, limit=3) == 4
    assert search_index.mark(conn).indexed_to == ids[-1] and _indexed(conn) == ids
    # a row gone wrong (written by hand): a rebuild starts over from the first job
    conn.execute("UPDATE portalq.job_search SET legal_name = 'wrong' WHERE job_id = %s",
                 (ids[0],))
    assert search_index.rebuild(conn, limit=3) == 7
    assert conn.execute("SELECT legal_name FROM portalq.job_search WHERE job_id = %s",
                        (ids[0],)).fetchone()[0] == "Juniper 0 Ltd."
    assert search_index.mark(conn).indexed_to == ids[-1]


def test_portalq_search_rebuild(conn, db):
    ids = [_named(f"Larch {i} Ltd.", conn) for i in range(3)]
    search_index.catch_up(conn, settle_seconds=0)
    conn.execute("UPDATE portalq.job_search SET legal_name = 'wrong' WHERE job_id = %s",
                 (ids[1],))
    out = run_cli("search", "rebuild")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"search index rebuilt: indexed up to job {ids[-1]}"
    assert conn.execute("SELECT legal_name FROM portalq.job_search WHERE job_id = %s",
                        (ids[1],)).fetchone()[0] == "Larch 1 Ltd."


def test_the_services_loop_indexes_on_the_leader_only(conn, dsn):
    """scheduler.search_indexer.loop as the service runs it, one round at a time: a node
    that does not lead leaves the index alone; the leader's round indexes what is above
    the mark. (Each round asks is_leader first: the answers given end the loop.)"""
    from psycopg_pool import AsyncConnectionPool

    from portalq.scheduler import search_indexer

    jobs = [_named(f"Maple {i} Ltd.", conn) for i in range(2)]

    def rounds(*answers: bool) -> None:
        told = iter(answers)

        def is_leader() -> bool:
            for answer in told:
                return answer
            raise asyncio.CancelledError   # the rounds asked for are done

        async def run() -> None:
            async with AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False) as pool:
                with contextlib.suppress(asyncio.CancelledError):
                    await search_indexer.loop(pool, is_leader, interval=0)
        asyncio.run(run())

    rounds(False)
    assert _indexed(conn) == []
    rounds(True)
    assert _indexed(conn) == jobs and search_index.mark(conn).indexed_to == jobs[-1]
