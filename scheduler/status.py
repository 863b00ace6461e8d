"""``portalq status``: queue depth by portal and status, running jobs with their step,
deferred jobs with their next-open time, recent failures and escalations."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from rich.console import Group
from rich.table import Table

from portalq.jobs import clock, readouts, waiting
from portalq.jobs.db import txn
from portalq.jobs.kinds import FINAL
from portalq.jobs.operations import outbox, portal_rows
from portalq.scheduler import estimates

#: the live view recomputes the ETAs at most this often (every waiting job is replayed)
ETA_EVERY_S = 15.0
_eta_cache: list[tuple[float, estimates.Loaded]] = []


def _etas(c: Any) -> estimates.Loaded:
    if _eta_cache and time.monotonic() - _eta_cache[0][0] < ETA_EVERY_S:
        return _eta_cache[0][1]
    loaded = estimates.load(c)
    _eta_cache[:] = [(time.monotonic(), loaded)]
    return loaded


def snapshot(conn: Any = None) -> dict[str, Any]:
    with txn.use(conn) as c:
        counts = readouts.depth(c)
        running = readouts.running(c)
        deferred = readouts.deferred(c)
        failures = readouts.recent_failures(c)
        portals = portal_rows.portals(c)
        loaded = _etas(c)
    etas = {jid: estimates.job_line(loaded, jid) for jid in (r["id"] for r in deferred)}
    depth: dict[str, dict[str, int]] = {}
    for row in counts:
        depth.setdefault(row["portal"], {})[row["status"]] = row["n"]
    return {"at": clock.now(), "depth": depth, "running": running, "deferred": deferred,
            "failures": failures, "backlog": estimates.portal_backlogs(loaded),
            "deferred_eta": {str(k): v for k, v in etas.items()},
            "at_risk": estimates.at_risk(loaded),
            "paused": [p["code"] for p in portals if p["paused_at"] is not None]}


def unsent_mail(conn: Any = None) -> int:
    """Escalations and portal notices still waiting to be mailed."""
    with txn.use(conn) as c:
        return outbox.unsent(c)


def final(snap: dict[str, Any]) -> bool:
    """No job is pending, deferred or running."""
    return not any(n for d in snap["depth"].values() for s, n in d.items()
                   if s not in FINAL)


def render(snap: dict[str, Any]) -> Any:
    def ago(t: datetime | None) -> str:
        if t is None:
            return "-"
        secs = (snap["at"] - t).total_seconds()
        return f"{secs:.0f}s ago" if secs >= 0 else f"in {-secs:.0f}s"

    statuses = ("pending", "deferred", "running", "completed", "failed", "cancelled")
    depth = Table(title=f"portalq — {snap['at'].astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC",
                  title_justify="left")
    depth.add_column("portal")
    for s in statuses:
        depth.add_column(s, justify="right")
    for portal, d in sorted(snap["depth"].items()):
        name = portal + (" (paused)" if portal in snap["paused"] else "")
        depth.add_row(name, *(str(d.get(s, "")) for s in statuses))

    running = Table(title="running", title_justify="left")
    for col in ("job", "type", "order", "portal", "attempt", "step", "started"):
        running.add_column(col)
    for r in snap["running"]:
        running.add_row(str(r["id"]), r["job_type"], r["order_id"], r["portal"],
                        str(r["attempts"]), r["step"] or "-", ago(r["started_at"]))

    deferred = Table(title="deferred (next opening)", title_justify="left")
    for col in ("job", "type", "order", "portal", "runs at (UTC)", "why", "eta"):
        deferred.add_column(col)
    for r in snap["deferred"]:
        deferred.add_row(str(r["id"]), r["job_type"], r["order_id"], r["portal"],
                         f"{r['run_at']:%Y-%m-%d %H:%M}",
                         waiting.describe(waiting.marker({waiting.KEY: r.get("waiting")})),
                         snap["deferred_eta"].get(str(r["id"])) or "-")

    def at(t: datetime | None) -> str:
        return f"{t:%Y-%m-%d %H:%M}" if t is not None else "-"

    backlog = Table(title="backlog ETA (last waiting job done, UTC)", title_justify="left")
    for col in ("portal", "waiting", "p50", "p90", "no estimate"):
        backlog.add_column(col)
    for b in snap["backlog"]:
        backlog.add_row(b["portal"], str(b["waiting"]), at(b["clears50"]), at(b["clears90"]),
                        str(b["unknown"] or ""))
    risks = Table(title="deadlines at risk", title_justify="left")
    risks.add_column("warning")
    for line in snap["at_risk"]:
        risks.add_row(line)

    failures = Table(title="recent failures and escalations", title_justify="left")
    for col in ("job", "type", "order", "attempts", "error", "mailed"):
        failures.add_column(col)
    for r in snap["failures"]:
        failures.add_row(str(r["id"]), r["job_type"], r["order_id"], str(r["attempts"]),
                         (r["last_error"] or "")[:70], "yes" if r["mailed"] else "pending")
    return Group(depth, running, deferred, backlog, risks, failures)
