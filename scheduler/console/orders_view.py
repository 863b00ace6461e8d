"""What the console shows of orders of a declared kind (issue 48): the list's state of each
order (blocked, at risk, on its way, done) and an order's steps as a pipeline -- each
step's state, its ETA (p50 and p90) and its deadline -- from the estimator ``portalq
orders show`` prints (scheduler/estimates.py).

The estimator replays every waiting job (0.8 s for 23,000 of them on the test machine), so
the orders pages of one console process share its snapshot for a short while
(:class:`Latest`): at most the live overview's refresh period old, and taken afresh after a
change the console hears of (a notification, a write from this console).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from portalq.jobs.business import order_runs, pipelines, results
from portalq.jobs.errors import InputError
from portalq.portals import deadlines
from portalq.scheduler import estimates

#: the order's states, in the order the list shows them
STATES = ("blocked", "at-risk", "on-its-way", "done", "cancelled")


class Latest:
    """The estimator's snapshot, shared by the views of ``ttl`` seconds unless
    ``changes()`` moved since it was taken (the console's count of changes it heard of)."""

    def __init__(self, ttl: float, changes: Callable[[], int]) -> None:
        self.ttl, self.changes = ttl, changes
        self.lock = threading.Lock()
        self.loaded: estimates.Loaded | None = None
        self.taken = 0.0
        self.seen = -1
        self.loads = 0   # snapshots taken (tests read it)

    def get(self, conn: Any) -> estimates.Loaded:
        with self.lock:
            now, changes = time.monotonic(), self.changes()
            if self.loaded is None or changes != self.seen or now - self.taken >= self.ttl:
                self.loaded = estimates.load(conn)
                self.taken, self.seen = time.monotonic(), changes
                self.loads += 1
            return self.loaded


def _state(row: Mapping[str, Any], risks: list[str]) -> tuple[str, str]:
    if row["cancelled_at"] is not None:
        return "cancelled", "cancelled"
    if row["failed_steps"]:
        return "blocked", f"blocked: {', '.join(row['failed_steps'])} failed"
    if risks:
        return "at-risk", "at risk"
    if row["open"]:
        return "on-its-way", "on its way"
    return "done", "done"


def listing(conn: Any, latest: Latest | None = None) -> list[dict[str, Any]]:
    """The orders, blocked and at-risk ones first, each with its state, why and its
    deadline warnings (``latest``: a shared estimator snapshot; None: one of its own)."""
    loaded = latest.get(conn) if latest is not None else estimates.load(conn)
    risks: dict[str, list[str]] = {}
    for order_id, _, text in estimates.at_risk_jobs(loaded):
        risks.setdefault(order_id, []).append(text)
    out = []
    for row in results.orders(list(risks), conn):
        found = risks.get(row["order_id"], [])
        state, why = _state(row, found)
        out.append({**row, "state": state, "why": why, "risks": found})
    return out


def _kind(name: str) -> pipelines.OrderKind | None:
    try:
        return pipelines.get(name)
    except InputError:   # a kind no longer declared: its steps are still shown
        return None


def _eta(loaded: estimates.Loaded, step: Mapping[str, Any], state: str,
         ) -> dict[str, Any]:
    """The step's expected finish (p50, p90), or why there is none."""
    job_id = step["job_id"]
    if state == "completed":
        return {"done": True}
    if job_id in loaded.running:
        at50, at90 = loaded.running[job_id]
        return {"p50": at50, "p90": at90}
    est = loaded.estimates.get(job_id)
    if est is not None and est.finish50 is not None and est.finish90 is not None:
        return {"p50": est.finish50, "p90": est.finish90, "why": list(est.reasons)}
    if state == "failed":
        return {"none": "it failed: a person retries it (or cancels the order)"}
    if state == "cancelled":
        return {"none": "cancelled"}
    return {"none": "; ".join(est.reasons) if est is not None and est.reasons else "unknown"}


def _deadline(loaded: estimates.Loaded, kind: pipelines.OrderKind | None,
              step: Mapping[str, Any], created_at: datetime,
              completed: Mapping[str, datetime]) -> dict[str, Any] | None:
    declared = kind.step(step["step"]).deadline if kind is not None and any(
        s.name == step["step"] for s in kind.steps) else None
    if declared is None:
        return None
    portal = loaded.portals.get(step["portal"])
    when = deadlines.due(declared, created_at=created_at, completed=completed,
                         calendar=portal.calendar if portal else None)
    tz = declared.timezone or (portal.calendar.timezone if portal else "UTC")
    pending = None if when else f"{declared.days} days after {declared.after} completes"
    return {"what": declared.what, "due": when, "tz": tz, "pending": pending}


def pipeline(conn: Any, order_id: str, latest: Latest | None = None,
             ) -> dict[str, Any] | None:
    """The order's steps in order with their state, ETA and deadline, whether it is
    blocked (a step failed) or at risk, and its finish; None for an order whose jobs were
    enqueued one by one (``latest`` as for :func:`listing`)."""
    record = results.order_record(order_id, conn)
    if record is None:
        return None
    loaded = latest.get(conn) if latest is not None else estimates.load(conn)
    timing = estimates.order_steps(conn, order_id)
    view = estimates.order_view(loaded, timing)
    completed = {r["step"]: r["finished_at"] for r in timing
                 if r["status"] == "completed" and r["finished_at"] is not None}
    kind = _kind(record["kind"])
    risky = set(view.get("at_risk_jobs", ()))
    steps = []
    for s in order_runs.order_steps(order_id, conn):
        held = bool(s["held"]) and s["status"] == "deferred"
        state = "held" if held else (s["status"] or "missing")
        steps.append({**s, "state": state,
                      "waiting_for": [a for a in s["after"] if a not in completed]
                      if held else [],
                      "eta": _eta(loaded, s, state), "at_risk": s["job_id"] in risky,
                      "deadline": _deadline(loaded, kind, s, record["created_at"],
                                            completed)})
    failed = [s["step"] for s in steps if s["state"] == "failed"]
    blocked = None
    if failed and record["cancelled_at"] is None:
        after = [s["step"] for s in steps if s["state"] == "held"]
        blocked = (f"Blocked: {', '.join(failed)} failed"
                   + (f"; {', '.join(after)} wait for it" if after else "")
                   + " until a person retries it (or cancels the order).")
    return {**record, "steps": steps, "blocked": blocked, "at_risk": view["at_risk"],
            "finish50": view["finish50"], "finish90": view["finish90"],
            "held_jobs": {s["job_id"]: s["waiting_for"] for s in steps
                          if s["state"] == "held"}}


__all__ = ["STATES", "Latest", "listing", "pipeline"]
