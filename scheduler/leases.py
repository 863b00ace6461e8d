"""This node's leases on the jobs it runs: when each job's heartbeat was last stamped,
and whether a flow may still go past a point of no return.

A lease runs from the moment its heartbeat was *sent* (the claim, or a renewal). After
:attr:`Leases.fence_after` seconds without a renewal this node stops the job's flow
itself (self-fencing), well before ``stale_after`` -- when another node may rescue and
rerun it -- so two runs of one job never overlap.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from portalq.scheduler.config import Settings


class Leases:
    def __init__(self, settings: Settings) -> None:
        self._stale_after = settings.stale_after_seconds
        self._heartbeat = settings.heartbeat_seconds
        #: job id -> when its heartbeat was last stamped (claim or renewal), monotonic
        self._stamped: dict[int, float] = {}
        #: set once a heartbeat loop renews leases; a worker driven by hand has none
        self.renewing = False

    @property
    def fence_after(self) -> float:
        """Seconds without a renewed heartbeat after which this node stops its own flows:
        well before ``stale_after``, when another node may rescue and rerun its jobs."""
        return self._stale_after - max(self._heartbeat, self._stale_after / 4)

    def stamp(self, job_ids: Iterable[int], sent: float) -> None:
        """Heartbeats sent at ``sent`` (monotonic) were written for these jobs."""
        for jid in job_ids:
            self._stamped[jid] = max(self._stamped.get(jid, sent), sent)

    def claimed(self, job_id: int, sent: float) -> None:
        self._stamped[job_id] = sent

    def drop(self, job_id: int) -> None:
        self._stamped.pop(job_id, None)

    def age(self, job_id: int, now: float) -> float:
        return now - self._stamped.get(job_id, now)

    def fresh(self, job_id: int) -> bool:
        """May this job's flow go past a point of no return now (its lease renewed
        recently enough that no other node can have rescued it)?"""
        if not self.renewing:
            return True
        stamped = self._stamped.get(job_id)
        return stamped is not None and time.monotonic() - stamped < self.fence_after
