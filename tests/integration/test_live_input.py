"""A takeover's input and its hand-back on the database: an input racing the hand-back
waits for it and is then refused, and no notification reaches the worker (the statement
notifies from the rows it locked only)."""

from __future__ import annotations

import asyncio
import threading

import psycopg

from portalq.jobs import queue
from portalq.jobs.operations import live_view
from tests import payloads


def _live_job(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as c:
        job = queue.enqueue("obtain_ein", "ORD-LI-1", payloads.OBTAIN_EIN, conn=c).id
        asyncio.run(_put(dsn, job))
        assert live_view.take(c, job, "ada")
    return job


async def _put(dsn: str, job: int) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        await live_view.put_frame(c, job, jpeg=b"\xff\xd8", taken_at=1.0, width=8, height=8,
                                  url="http://portal.test/")


def test_an_input_racing_the_hand_back_is_refused_and_never_sent(db, dsn):
    job = _live_job(dsn)
    with psycopg.connect(dsn, autocommit=True) as listener, \
            psycopg.connect(dsn) as releasing, psycopg.connect(dsn) as sending:
        listener.execute("LISTEN portalq_live_input")
        assert live_view.release(releasing, job, "ada")   # not committed yet
        sent: list[bool] = []
        racer = threading.Thread(target=lambda: sent.append(
            live_view.send_input(sending, job, "ada", {"kind": "text", "text": "x"})))
        racer.start()
        racer.join(0.5)
        assert racer.is_alive()      # waits for the hand-back's lock
        releasing.commit()
        racer.join(10)
        sending.commit()
        assert sent == [False]
        heard = [n.payload for n in listener.notifies(timeout=1.0)]
    assert heard and all('"handback"' in p for p in heard), heard   # the hand-back only
