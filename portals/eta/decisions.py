"""What is under way: a run started, a submission waiting for its portal's decision (a
registry examining a filing) -- when each is expected over, given that it is not yet
(portals/eta/)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from statistics import NormalDist

from portalq.portals.eta.model import Duration, Job, ts, words
from portalq.portals.eta.replay import Replay

NORMAL = NormalDist()


def waiting(replay: Replay, job: Job) -> None:
    """Submitted: the portal decides within its declared time since the submission -- its
    p50 / p90 given that it had not decided by the last check (a decision overdue by the
    declared p50 is not due at the next check: it is in the distribution's tail) -- and the
    decision is seen at the first check after it (``job.checks``), in the portal's hours."""
    assert job.submitted_at is not None
    since, now = ts(job.submitted_at), replay.now
    check = ts(job.next_check) if job.next_check is not None else now
    cadence = job.checks
    if cadence is None:
        finish = replay.looked(job.portal, max(
            now, check, since + given(job.processing, now - since, replay.q)))
    else:
        # the checks' schedule from the submission: the next one is the k-th, the last one
        # due by then (a check runs late, never early: a worker busy, a run's time), and
        # the one before it saw no decision
        k = cadence.index(check - since)
        if k > 1 and cadence.at(k) > check - since + 1:
            k -= 1
        last = cadence.at(k - 1) if k > 1 else 0.0
        if job.last_check is not None:   # as it ran: a closed portal moves checks later
            last = min(max(ts(job.last_check) - since, 0.0), max(now - since, 0.0))
        decided = since + given(job.processing, last, replay.q)
        # the checks from the next one on, as the service runs them (the gap after it is
        # the schedule's)
        finish = replay.checked(job.portal, cadence, check,
                                cadence.at(k + 1) - cadence.at(k), max(decided, now))
    replay.out[job.id] = (since, since, finish, 0)
    portal = replay.snap.portals.get(job.portal)
    replay.why[job.id] = [
        f"submitted {job.submitted_at:%a %H:%M} UTC; "
        f"{portal.label if portal else job.portal} decides within "
        f"~{words(timedelta(seconds=replay.processing(job)))} "
        f"({job.processing.source() if job.processing else 'declared'})"]


def run_end(started: datetime, run: Duration, now: datetime) -> datetime:
    """A running job's expected end (p50): its run's median given the time it has run
    (one running past its median is not ending now: its end is in the tail)."""
    elapsed = (now - started).total_seconds()
    return max(started + timedelta(seconds=given(run, elapsed, 50)), now)


def given(p: Duration | None, elapsed: float, q: int) -> float:
    """The q-th percentile of a processing time that has lasted ``elapsed`` seconds: a
    log-normal through its declared p50 and p90, conditioned on being longer than that."""
    if p is None:
        return 0.0
    p50, p90 = p.p50.total_seconds(), p.p90.total_seconds()
    if p50 <= 0 or p90 <= p50 or elapsed <= 0:
        return p50 if q == 50 else p90
    sigma = math.log(p90 / p50) / NORMAL.inv_cdf(0.9)
    gone = NORMAL.cdf(math.log(elapsed / p50) / sigma)
    level = min(gone + (q / 100) * (1 - gone), 1 - 1e-9)
    return p50 * math.exp(sigma * NORMAL.inv_cdf(level))


def measured(decided: Sequence[float], undecided: Sequence[float], *, least: int,
             ) -> Duration | None:
    """A registry's processing (p50, p90) learnt from the decisions it made, ``decided``
    (seconds from each submission to its decision), and the submissions it has not decided
    yet, ``undecided`` (seconds each has waited so far, known undecided): a Kaplan-Meier
    estimate. The undecided count: the decisions seen by any instant are the quick ones
    of the submissions made since (after a burst, all the quick ones and none of the slow
    ones), so their plain quantiles are early -- measured in the replay, 4.5 -> 17 % of the
    finishes after the p90. None with fewer than ``least`` decisions, or while the
    undecided are too many to place the p90 (use the declared times then)."""
    if len(decided) < least:
        return None
    # at a tie a decision counts before a submission still waiting that long
    times = sorted([(x, 0) for x in decided] + [(x, 1) for x in undecided])
    at_risk, survived = len(times), 1.0
    p50 = p90 = None
    for x, censored in times:
        if not censored:
            survived *= 1 - 1 / at_risk
            if p50 is None and survived <= 0.5 + 1e-12:
                p50 = x
            if survived <= 0.1 + 1e-12:
                p90 = x
                break
        at_risk -= 1
    if p50 is None or p90 is None:
        return None
    return Duration(timedelta(seconds=p50), timedelta(seconds=p90), len(decided))


__all__ = ["given", "measured", "run_end", "waiting"]
