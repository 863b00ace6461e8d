"""The ETA loader (issue 41): one snapshot from the database -- portals and their
calendars, the jobs not started yet, the running ones, measured durations, today's per-key
rate counts, the orders still holding steps -- handed to the pure estimator
(portals/eta/), and the views ``jobs show``, ``orders show`` and ``status`` print.

Every estimate is computed afresh from the database on each call, so a closure added, a
portal paused or a grown backlog shows at once; nothing is stored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from portalq.jobs import clock, queue, types
from portalq.jobs.business import eta_reads, pipelines
from portalq.jobs.errors import InputError
from portalq.portals import deadlines, lookups, steps
from portalq.portals.eta import (
    Checks,
    Duration,
    Estimates,
    Job,
    PortalState,
    Running,
    Snapshot,
    estimate,
    measured,
    run_end,
    text,
)
from portalq.scheduler import calendar_cache
from portalq.scheduler.config import Settings

#: what a job is, for people
LABELS = {"obtain_ein": "EIN", "file_entity": "filing", "name_search": "name approval",
          "deliver": "delivery", "process_crtc": "CRTC registration"}
#: run durations until enough runs were measured (a browser flow; a mail or API call)
BROWSER_RUN = Duration(timedelta(minutes=3), timedelta(minutes=10))
PLAIN_RUN = Duration(timedelta(seconds=10), timedelta(minutes=1))
#: measured runs needed before the measurement replaces the default
MIN_MEASURED = 5
#: how far back completions are measured
MEASURE_SINCE = timedelta(days=30)
DEFAULT_WORKERS = 4


@dataclass(frozen=True)
class Loaded:
    now: datetime
    portals: dict[str, calendar_cache.Portal]
    jobs: dict[int, Job]
    estimates: Estimates
    #: job id -> its row (order, step, status)
    rows: dict[int, dict[str, Any]]
    #: running jobs: job id -> expected end, p50 and p90 (the portal's processing and its
    #: checks in its hours included)
    running: dict[int, tuple[datetime, datetime]]
    #: the steps of the orders still holding one, by order
    orders: dict[str, list[dict[str, Any]]]


def _workers() -> int:

    try:
        return Settings().workers
    except Exception:  # noqa: BLE001 - a view: an unreadable setting is not an error here
        return DEFAULT_WORKERS


def _jobtype(name: str) -> types.JobType | None:
    try:
        return types.get(name)
    except InputError:
        return None


def _durations(measured: list[dict[str, Any]], pairs: set[tuple[str, str]],
               ) -> dict[tuple[str, str], Duration]:
    out = {}
    for r in measured:
        if r["n"] >= MIN_MEASURED:
            out[(r["job_type"], r["portal"])] = Duration(
                timedelta(seconds=float(r["p50"])), timedelta(seconds=float(r["p90"])), r["n"])
    for job_type, portal in pairs - out.keys():
        jt = _jobtype(job_type)
        out[(job_type, portal)] = BROWSER_RUN if jt is None or jt.uses_browser else PLAIN_RUN
    return out


def _portal_states(portals: Mapping[str, calendar_cache.Portal], workers: int,
                   running: Mapping[str, tuple[datetime, ...]]) -> dict[str, PortalState]:
    out = {}
    for code, p in portals.items():
        paused = None if p.enabled else "disabled"
        if p.paused:
            paused = f"paused by {p.paused_by or 'an operator'}"
        out[code] = PortalState(
            p.calendar, min(p.max_sessions or workers, workers), code, paused,
            p.probe_at if p.paused and p.paused_by == "breaker" else None,
            tuple(cal for (portal, _), cal in steps.STEPS.items() if portal == code),
            running.get(code, ()))
    return out


#: (job type, portal) -> the portal's processing after the submission, its checks, and
#: the job type's rate limit
Declared = dict[tuple[str, str], tuple[Duration | None, Checks | None, types.RateLimit | None]]
#: (portal, submission) -> the registry's processing measured from its recorded decisions
Measured = dict[tuple[str, str], Duration]


def _measured(decided: list[dict[str, Any]], waiting: list[dict[str, Any]]) -> Measured:
    """Each registry's processing from its decisions and the submissions it has not
    decided yet (each undecided at its marker's last check)."""
    took: dict[tuple[str, str], list[float]] = {}
    for r in decided:
        took.setdefault((r["portal"], r["submission"]), []).append(float(r["secs"]))
    waited: dict[tuple[str, str], list[float]] = {}
    for r in waiting:
        mark = _mark(r)
        if mark and mark.get("submission") and mark.get("since") and mark.get("last_check"):
            key = (str(mark["portal"]), str(mark["submission"]))
            waited.setdefault(key, []).append((
                datetime.fromisoformat(str(mark["last_check"]))
                - datetime.fromisoformat(str(mark["since"]))).total_seconds())
    out = {}
    for key, xs in took.items():
        found = measured(xs, waited.get(key, ()), least=MIN_MEASURED)
        if found is not None:
            out[key] = found
    return out


def _mark(r: Mapping[str, Any]) -> Mapping[str, Any] | None:
    mark = r.get("waiting")
    if isinstance(mark, str):
        mark = json.loads(mark)
    return mark if isinstance(mark, Mapping) else None


def _declared(job_type: str, portal: str, cache: Declared, learnt: Measured,
              ) -> tuple[Duration | None, Checks | None, types.RateLimit | None]:
    """The processing and lookup cadence of the job type's submission and its rate limit,
    looked up once per (type, portal) in a load: one object each, as the estimator
    computes once per kind of job (and a job type's look-up reads the settings). The
    processing is the one measured from the registry's decisions once there are enough of
    them, else the declared one."""
    found = cache.get((job_type, portal))
    if found is None:
        declared = lookups.processing(job_type, portal)
        key = lookups.SUBMISSIONS.get((job_type, portal))
        checks = processing = None
        if key is not None:
            rule = lookups.rule(*key)
            checks = Checks(rule.check_every, rule.backoff, rule.check_cap)
            processing = learnt.get(key)
        if processing is None and declared:
            processing = Duration(*declared)
        jt = _jobtype(job_type)
        found = cache[(job_type, portal)] = (processing, checks,
                                             jt.rate_limit if jt is not None else None)
    return found


def _job(r: Mapping[str, Any], after: tuple[int, ...], cache: Declared, learnt: Measured,
         ) -> Job:
    processing, checks, rate = _declared(r["job_type"], r["portal"], cache, learnt)
    mark = _mark(r)
    submitted = next_check = last_check = None
    if mark is not None and mark.get("since"):
        submitted = datetime.fromisoformat(str(mark["since"]))
        next_check = r["run_at"]
        if mark.get("last_check"):
            last_check = datetime.fromisoformat(str(mark["last_check"]))
        if processing is None and mark.get("expected_by"):
            within = datetime.fromisoformat(str(mark["expected_by"])) - submitted
            processing = Duration(within / 2, within)
    return Job(r["id"], r["job_type"], r["portal"], r["priority"],
               None if r.get("held") else r["run_at"],
               r["rate_key"] if rate else None, rate.limit if rate else None,
               rate.words if rate else "", processing, submitted, next_check, after,
               LABELS.get(r["job_type"], r["job_type"]), checks, last_check)


def load(conn: Any, now: datetime | None = None, *, workers: int | None = None) -> Loaded:
    """Every waiting job's estimate, from one read of the database."""
    now = now or clock.now()
    portals = calendar_cache.load_sync(conn)
    rows, run_rows = eta_reads.waiting(conn), eta_reads.running(conn)
    measured = eta_reads.durations(conn, now - MEASURE_SINCE)
    decided = _measured(eta_reads.decisions(conn, now - MEASURE_SINCE), rows)
    used = eta_reads.rate_used(conn, _day_starts(portals, rows, now))
    return _assemble(now, portals, rows, run_rows, eta_reads.held_orders(conn), measured,
                     decided, used, workers or _workers())


async def aload(conn: Any, now: datetime | None = None, *, workers: int | None = None,
                ) -> Loaded:
    """:func:`load` on an async connection (the service), the replay in a thread."""
    now = now or clock.now()
    portals = await calendar_cache.load(conn)
    rows, run_rows = await eta_reads.awaiting(conn), await eta_reads.arunning(conn)
    measured = await eta_reads.adurations(conn, now - MEASURE_SINCE)
    decided = _measured(await eta_reads.adecisions(conn, now - MEASURE_SINCE), rows)
    used = await eta_reads.arate_used(conn, _day_starts(portals, rows, now))
    orders = await eta_reads.aheld_orders(conn)
    return await asyncio.to_thread(_assemble, now, portals, rows, run_rows, orders, measured,
                                   decided, used, workers or _workers())


def _day_starts(portals: Mapping[str, calendar_cache.Portal], rows: list[dict[str, Any]],
                now: datetime) -> dict[str, datetime]:
    limited = {r["portal"] for r in rows if r["rate_key"]} & portals.keys()
    return {p: calendar_cache.portal_day(portals[p], now)[0] for p in sorted(limited)}


def _assemble(now: datetime, portals: dict[str, calendar_cache.Portal], rows: list[dict[str, Any]],
              run_rows: list[dict[str, Any]], orders: list[dict[str, Any]],
              measured: list[dict[str, Any]], decided: Measured, used: list[dict[str, Any]],
              workers: int) -> Loaded:
    pairs = {(r["job_type"], r["portal"]) for r in (*rows, *run_rows)}
    durations = _durations(measured, pairs)
    ends: dict[int, Running] = {}   # running jobs: their expected end and what follows
    running: dict[str, tuple[datetime, ...]] = {}
    cache: Declared = {}
    for r in run_rows:
        end = run_end(r["started_at"], durations[(r["job_type"], r["portal"])], now)
        running[r["portal"]] = (*running.get(r["portal"], ()), end)
        processing, checks, _ = _declared(r["job_type"], r["portal"], cache, decided)
        ends[r["id"]] = Running(r["portal"], end, processing, checks)
    ids = {(o["order_id"], o["step"]): o["job_id"] for o in orders}
    done = {o["job_id"]: o["finished_at"] for o in orders
            if o["status"] == "completed" and o["finished_at"] is not None}
    jobs = []
    for r in rows:
        after = ()
        if r.get("held") and r.get("after"):
            after = tuple(ids.get((r["order_id"], s), -1) for s in r["after"])
        jobs.append(_job(r, after, cache, decided))
    snap = Snapshot(now, _portal_states(portals, workers, running), jobs,
                    durations, BROWSER_RUN,
                    {(r["portal"], r["rate_key"]): r["n"] for r in used}, done, ends)
    by_order: dict[str, list[dict[str, Any]]] = {}
    for o in orders:
        by_order.setdefault(o["order_id"], []).append(o)
    estimates = estimate(snap)
    return Loaded(now, portals, {j.id: j for j in jobs}, estimates,
                  {r["id"]: r for r in rows}, estimates.running(), by_order)


def load_fresh(order_id: str | None = None,
               ) -> tuple[Loaded, list[dict[str, Any]]]:
    """:func:`load` on a connection of its own, with ``order_id``'s steps (the CLI)."""
    with queue.connect() as conn:
        loaded = load(conn)
        return loaded, (order_steps(conn, order_id) if order_id else [])


def _tz(loaded: Loaded, portal: str) -> str:
    p = loaded.portals.get(portal)
    return p.calendar.timezone if p is not None else "UTC"


def job_line(loaded: Loaded, job_id: int) -> str | None:
    """The job's ETA in words, or None for a job that is not waiting."""
    job, est = loaded.jobs.get(job_id), loaded.estimates.get(job_id)
    if job is None or est is None:
        return None
    return text(job, est, _tz(loaded, job.portal))


def job_eta(loaded: Loaded, job_id: int) -> dict[str, Any] | None:
    """The job's ETA for a program (``jobs show --json``): the line :func:`job_line` prints
    (``text``), the times it gives (``expected``: p50, ``latest``: p90; None when there is
    no estimate), the jobs of its portal ahead of it and why; None for a job not waiting."""
    job, est = loaded.jobs.get(job_id), loaded.estimates.get(job_id)
    if job is None or est is None:
        return None
    return {"text": text(job, est, _tz(loaded, job.portal)),
            "expected": est.finish50, "latest": est.finish90, "starts": est.start50,
            "ahead": est.ahead, "reasons": list(est.reasons)}


def order_steps(conn: Any, order_id: str) -> list[dict[str, Any]]:
    return eta_reads.order(conn, order_id)


def order_view(loaded: Loaded, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """An order's ETA from its steps (:func:`order_steps`): per step its line, the order's
    finish (p50, p90) and the deadlines at risk."""
    if not rows:
        return {"steps": {}, "finish50": None, "finish90": None, "at_risk": []}
    try:
        kind = pipelines.get(rows[0]["kind"])
    except InputError:
        kind = None
    completed = {r["step"]: r["finished_at"] for r in rows if r["status"] == "completed"}
    lines: dict[str, str | None] = {}
    f50: list[datetime | None] = []
    f90: list[datetime | None] = []
    risks: list[str] = []
    risky: list[int] = []
    for r in rows:
        est = loaded.estimates.get(r["job_id"])
        if r["status"] == "completed":
            continue
        if est is None:   # running, failed, cancelled: shown by its status
            if r["job_id"] in loaded.running:
                at50, at90 = loaded.running[r["job_id"]]
                f50.append(at50)
                f90.append(at90)
            elif r["status"] != "cancelled":
                f50.append(None)
            continue
        lines[r["step"]] = job_line(loaded, r["job_id"])
        f50.append(est.finish50)
        f90.append(est.finish90)
        step = kind.step(r["step"]) if kind is not None else None
        job = loaded.jobs[r["job_id"]]
        if step is not None and step.deadline is not None and job.submitted_at is None:
            portal = loaded.portals.get(job.portal)
            when = deadlines.due(step.deadline, created_at=r["created_at"],
                                 completed=completed,
                                 calendar=portal.calendar if portal else None)
            risk = deadlines.at_risk(r["step"], step.deadline, when, est) if when else None
            if risk is not None:
                risks.append(risk.text(step.deadline.timezone or _tz(loaded, job.portal)))
                risky.append(r["job_id"])
    k50 = [t for t in f50 if t is not None]
    k90 = [t for t in f90 if t is not None]
    known = len(k50) == len(f50) and len(k90) == len(f90) and bool(k50)
    return {"steps": lines, "finish50": max(k50) if known else None,
            "finish90": max(k90) if known else None, "at_risk": risks, "at_risk_jobs": risky}


def portal_backlogs(loaded: Loaded) -> list[dict[str, Any]]:
    """Per portal: jobs waiting and when the last of them is expected done (p50, p90)."""
    out: dict[str, dict[str, Any]] = {}
    for jid, job in loaded.jobs.items():
        row = out.setdefault(job.portal, {"portal": job.portal, "waiting": 0, "unknown": 0,
                                          "clears50": 0.0, "clears90": 0.0})
        row["waiting"] += 1
        found = loaded.estimates.finishes(jid)
        if found is None:
            row["unknown"] += 1
            continue
        row["clears50"] = max(row["clears50"], found[0])
        row["clears90"] = max(row["clears90"], found[1])
    for row in out.values():
        for k in ("clears50", "clears90"):
            row[k] = datetime.fromtimestamp(row[k], UTC) if row[k] else None
    return [out[k] for k in sorted(out)]


def at_risk(loaded: Loaded) -> list[str]:
    """The deadline warnings of every order still holding a step."""
    return [f"order {order}: {text}" for order, _, text in at_risk_jobs(loaded)]


def at_risk_jobs(loaded: Loaded) -> list[tuple[str, int, str]]:
    """(order, job id, warning) of every step at risk in an order still holding one."""
    out: list[tuple[str, int, str]] = []
    for order_id, rows in sorted(loaded.orders.items()):
        view = order_view(loaded, rows)
        out.extend((order_id, jid, text)
                   for jid, text in zip(view["at_risk_jobs"], view["at_risk"], strict=True))
    return out


async def aescalate_at_risk(conn: Any, now: datetime | None = None) -> int:
    """Tell a person of every step whose p90 passes its deadline, before it is missed:
    an ``at_risk`` escalation (mailed by the outbox), once per job and attempt. The number
    of new ones."""
    loaded = await aload(conn, now)
    made = 0
    for order_id, jid, warning in at_risk_jobs(loaded):
        attempt = int(loaded.rows[jid].get("attempts") or 0)
        made += await eta_reads.aescalate(conn, jid, attempt, f"order {order_id}: {warning}",
                                         loaded.now)
    return made


__all__ = ["Loaded", "aescalate_at_risk", "aload", "at_risk", "at_risk_jobs", "job_line",
           "load", "load_fresh", "order_steps", "order_view", "portal_backlogs"]
