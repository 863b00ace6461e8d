"""The console search's indexer in the service (issue 49.1): on the leader, a step of
:mod:`portalq.jobs.search_index` whenever the queue has jobs above the mark, at once again
while batches come full, else every :data:`INTERVAL`. Idle, it reads one ``EXISTS`` a
period and writes nothing (no transaction id, no commit to flush)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from portalq.jobs import search_index
from portalq.jobs.db import connections

log = logging.getLogger("portalq.search")

#: how often an idle indexer looks: with a step's own time and a gap's settling, what keeps
#: the search's index within ~1 s of the enqueues (bench/search_lag.py)
INTERVAL = 0.25


async def loop(pool: Any, is_leader: Callable[[], bool], *,
               interval: float = INTERVAL) -> None:
    while True:
        full = False
        if is_leader():
            try:
                async with pool.connection() as conn:
                    if await search_index.abehind(conn):
                        full = (await search_index.astep(conn)).full
            except connections.LOST as exc:
                log.warning("search index not brought up to date now (%s); trying again", exc)
            except Exception as exc:  # noqa: BLE001 - the loop must survive; tried again
                log.error("search index step failed: %s: %s", type(exc).__name__, exc)
        if not full:
            await asyncio.sleep(interval)
