"""Which sealed jobs this node can open (issue 35): a node without the data-key file (or
with another keyring) would claim every sealed job and fail it -- five attempts in three
seconds and an escalation each. It claims only jobs sealed with keys it holds instead,
and says once which it leaves to other nodes."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from portalq.jobs import worker_api
from portalq.jobs.secrets import crypto

log = logging.getLogger("portalq.worker")

#: how long the node's key ids are kept (a rotation elsewhere shows within this)
RECHECK_SECONDS = 5.0
#: how often, until it has said so, the node looks for waiting jobs it cannot open
TELL_EVERY_SECONDS = 30.0


class NodeKeys:
    def __init__(self) -> None:
        self._ids: list[str] = []
        self._at = float("-inf")
        self._told_at = float("-inf")
        self._told = False
        self._error: str | None = None

    async def ids(self) -> list[str]:
        """The ids of the keys this node holds (none when its key provider fails)."""
        now = time.monotonic()
        if now - self._at >= RECHECK_SECONDS:
            try:   # a key service may be a network call: off the event loop
                self._ids = list(await asyncio.to_thread(lambda: crypto.provider().key_ids()))
                self._error = None
            except Exception as exc:  # noqa: BLE001 - no keys: no sealed job is claimed
                self._ids = []
                self._error = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            self._at = now
        return self._ids

    async def tell_if_left(self, conn: Any) -> None:
        """Say once (in the log) that waiting sealed jobs are left to other nodes."""
        now = time.monotonic()
        if self._told or now - self._told_at < TELL_EVERY_SECONDS:
            return
        self._told_at = now
        key_id = await worker_api.sealed_unopenable(conn, self._ids)
        if key_id is None:
            return
        self._told = True
        why = (f"its key provider failed: {self._error}" if self._error is not None
               else f"key {key_id} is not in {_where()}")
        log.error("this node cannot open sealed jobs waiting in the queue (%s): it does "
                  "not claim them; they wait for a node that has the key", why)


def check_key_file() -> None:
    """At a node's start: its key file, if it has one, is a keyring (PortalqError, one
    line, otherwise). A node without one runs (it claims no sealed job, :class:`NodeKeys`)
    and never makes one: its sealed values would be under a key no other node opens."""
    p = crypto.provider()
    path = getattr(p, "path", None)
    if isinstance(p, crypto.FileKeyring) and path is not None and path.exists():
        p.key_ids()


def tell_missing_key_file() -> None:
    """Say at start (one log line) that this node has no keyring, and what to do."""
    try:
        p = crypto.provider()
    except Exception:  # noqa: BLE001 - a key setup this node lacks: said where it is used
        return
    if isinstance(p, crypto.FileKeyring) and not p.path.exists():
        log.warning("no keyring at %s: this node claims no sealed job and seals nothing; "
                    "copy the other nodes' key file there (or make the first with `portalq "
                    "keys init`)", p.path)


def _where() -> str:
    p = crypto.provider()
    path = getattr(p, "path", None)
    return f"its key file {path}" if path is not None else f"its keys ({type(p).__name__})"
