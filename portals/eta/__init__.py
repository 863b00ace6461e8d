"""When will it be done? A job's and an order's start and finish, p50 and p90 (issue 41).

A pure function of a :class:`Snapshot` -- calendars, the queue, limits, durations, now --
so tests drive it with synthetic inputs and a frozen instant; the loader (scheduler/estimates.py)
builds the snapshot from the database.

What it models, per portal, by replaying the claim in time:

- the claim order: among due jobs, priority first, then run_at, then id (jobs/db/sql/
  queries.sql ``claim``); a job due later joins when it comes due;
- concurrency: the portal's sessions (its ``max_concurrent_sessions``, at most the workers'
  capacity), the running jobs holding theirs until their expected end;
- the calendar: a job starts only when the portal can start one (hours, holidays,
  closures, the cut-off before closing) and every step calendar of that portal is open
  (PayBC's hours for BC: portals/steps.py);
- per-key rate limits: a key's jobs past its limit for the portal's day move to the next
  portal day (one EIN per responsible party per IRS day), as the claim defers them;
- run durations per (job type, portal): measured p50 / p90, or a default;
- the portal's own processing after a submission (a registry examining a filing): the
  declared p50 / p90 after the run; a job already waiting on the portal finishes when its
  declared time since the submission is up, at the earliest at its next check;
- an order's held steps: released when every step before them finishes, then queued
  behind the backlog their portal has then.

The p50 replay uses median durations, the p90 replay the p90 ones (for every job ahead
too, so for a long backlog the p90 is on the safe side). Not modelled: failures and
retries, escalations waiting for a person, portal outages to come, jobs enqueued later
with a higher priority, other nodes' workers beyond ``sessions``.

The package: ``model`` (the snapshot and the estimate), ``openings`` (when a portal can
start a job), ``replay`` (the claim replayed in time) and ``view`` (:func:`estimate`, the
estimates made into words).
"""

from __future__ import annotations

from portalq.portals.eta.decisions import measured, run_end
from portalq.portals.eta.model import (
                                      HORIZON,
                                      Checks,
                                      Duration,
                                      Estimate,
                                      Job,
                                      PortalState,
                                      Running,
                                      Snapshot,
)
from portalq.portals.eta.view import Estimates, estimate, text

__all__ = ["HORIZON", "Checks", "Duration", "Estimate", "Estimates", "Job", "PortalState",
           "Running", "Snapshot", "estimate", "measured", "run_end", "text"]
