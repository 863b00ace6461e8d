"""Job ids known before the INSERT, for the jobs whose secrets are sealed bound to their id
(jobs/secrets/sealing.py): taken from job_queue's sequence in blocks, per connection.

A block is fetched when a connection has none left (one ``nextval`` round trip for the
whole block); its size grows fourfold while a connection keeps using up its blocks within
:data:`MAX_AGE` (1, 4, 16, 64, :data:`MAX_BLOCK`), so a burst of single enqueues pays about
one extra round trip per 256 jobs and a lone enqueue wastes no id. Ids left in a block
older than :data:`MAX_AGE` are dropped (a gap in the ids, as a rolled-back insert leaves):
a job's id is then never more than a second older than its enqueue, and the claim order
(``run_at, id``) stays what it was. Sequences are not transactional, so an id taken inside
a caller's transaction that rolls back is simply never used.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from portalq.jobs.db import sql

MAX_BLOCK = 256
MAX_AGE = 1.0
#: a block's age is measured on this clock (a duration, not an instant: tests move it)
monotonic = time.monotonic


@dataclass
class _Block:
    ids: deque[int] = field(default_factory=deque)
    born: float = 0.0
    size: int = 1


_BLOCKS: weakref.WeakKeyDictionary[Any, _Block] = weakref.WeakKeyDictionary()


def take(conn: Any, n: int) -> list[int]:
    """``n`` unused job ids for inserts on ``conn`` (a psycopg connection)."""
    block = _BLOCKS.get(conn)
    if block is None:
        block = _BLOCKS[conn] = _Block()
    now = monotonic()
    if block.ids and now - block.born > MAX_AGE:
        block.ids.clear()
        block.size = 1
    if len(block.ids) < n:
        if block.born and now - block.born <= MAX_AGE:
            block.size = min(block.size * 4, MAX_BLOCK)   # used up quickly: a burst
        else:
            block.size = 1
        fresh = sql.fetch_value(conn, "next_job_ids", {"n": max(n - len(block.ids),
                                                                block.size)})
        block.ids.extend(fresh)
        block.born = now
    ids = block.ids
    return [ids.popleft() for _ in range(n)]
