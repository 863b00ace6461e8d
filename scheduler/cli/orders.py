"""The business's orders (issue 36, 41):

    portalq enqueue-order delaware_llc --order ORD-1001 --input-file order.json
    portalq orders show ORD-1001 [--json]     # every job, its status, result and timeline
    portalq orders cancel ORD-1001 --reason "the client withdrew"

Orders as pipelines live in jobs/business/order_runs.py; what became of an order in
jobs/business/results.py
(nothing secret is shown).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from portalq.jobs import audit, queue
from portalq.jobs.business import order_runs, results
from portalq.scheduler.cli.common import DbUrl, cli_actor, fail, load_payload, print_json, use_url

app = typer.Typer(no_args_is_help=True,
                  help="Orders: pipelines of jobs across portals, and what became of them.")


def enqueue_order(
    kind: Annotated[str, typer.Argument(help="the order kind, e.g. delaware_llc")],
    order: Annotated[str, typer.Option("--order", help="the business's order id")],
    input_file: Annotated[Path | None, typer.Option(
        "--input-file", help="the order's input, a JSON object")] = None,
    input_json: Annotated[str | None, typer.Option(
        "--input", help="the order's input as JSON text")] = None,
    priority: Annotated[int, typer.Option(help="-100..100, higher first")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print the order's jobs")] = False,
    database_url: DbUrl = None,
) -> None:
    """Create an order: all its jobs at once, the first steps pending, the others held
    until the steps they need completed. Prints one line per step."""
    if (input_file is None) == (input_json is None):
        fail("give --input-file or --input (one of them)")
    data = load_payload(input_json, input_file, "order input")
    use_url(database_url)
    created = order_runs.enqueue_order(kind, order, data, priority=priority)
    if as_json:
        print_json({"order_id": created.order_id, "kind": created.kind, "jobs": created.jobs,
                    "started": list(created.started)})
        return
    for step, job_id in created.jobs.items():
        state = "pending" if step in created.started else "held"
        typer.echo(f"{created.order_id} {step}: job {job_id} ({state})")


@app.command("cancel")
def cancel(
    order: Annotated[str, typer.Argument(help="the order id")],
    reason: Annotated[str, typer.Option("--reason", help="why (kept in the audit log)")],
    database_url: DbUrl = None,
) -> None:
    """Cancel what has not run of an order (pending, waiting and held jobs); a running job
    runs on, a failed one is left for a person."""
    use_url(database_url)
    actor = cli_actor()
    with queue.connect() as conn, conn.transaction():
        cancelled = order_runs.cancel_order(order, reason=reason, actor=actor, conn=conn)
        audit.record(conn, audit.Actor(actor, None, "cli"), "order.cancel", f"order:{order}",
                     reason, after={"cancelled_jobs": cancelled})
    typer.echo(f"order {order} cancelled: "
               + (f"jobs {', '.join(map(str, cancelled))} cancelled" if cancelled
                  else "no job left to cancel"))


def _when(value: Any) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}Z" if value is not None else "-"


def _timeline(job: dict[str, Any]) -> list[tuple[Any, str]]:
    """The job's transitions and escalations, in time order."""
    lines: list[tuple[Any, str]] = []
    for e in job["events"]:
        detail = e.get("detail") or {}
        what = f" [{detail['event']}]" if isinstance(detail, dict) and detail.get("event") else ""
        err = f"  error: {e['error']}" if e["error"] else ""
        lines.append((e["at"], f"#{e['attempt']} {e['from_status'] or '-'} -> "
                               f"{e['to_status']}{what}{err}"))
    for x in job["escalations"]:
        settled = f" (resolved {_when(x['resolved_at'])})" if x["resolved_at"] else ""
        lines.append((x["created_at"], f"a person was told ({x['kind']}): "
                                       f"{x['reason']}{settled}"))
    return sorted(lines, key=lambda line: line[0])


@app.command("show")
def show(order_id: str, as_json: Annotated[bool, typer.Option("--json")] = False,
         database_url: DbUrl = None) -> None:
    """Every job of an order: its status, its result and its timeline."""
    use_url(database_url)
    view = results.order(order_id)
    if as_json:
        print_json(view)
        return
    # the estimator (calendars, the replay) only for the commands that show an ETA
    from portalq.scheduler import estimates
    loaded, steps = estimates.load_fresh(order_id)
    when = estimates.order_view(loaded, steps)
    typer.echo(f"order {view['order_id']}: {len(view['jobs'])} job(s)")
    if when["finish50"] is not None:
        typer.echo(f"expected done {_when(when['finish50'])} "
                   f"(by {_when(when['finish90'])} at the latest)")
    elif when["steps"] or any(j["status"] == "failed" for j in view["jobs"]):
        typer.echo("no estimate for the order: a step is failed, escalated or on a paused "
                   "portal (see below)")
    for warning in when["at_risk"]:
        typer.echo(warning)
    for job in view["jobs"]:
        typer.echo(f"\njob {job['id']} {job['job_type']} on {job['portal']}: {job['status']}"
                   f" (attempt {job['attempts']}/{job['max_attempts']}, "
                   f"finished {_when(job['finished_at'])})")
        typer.echo(f"  result: {json.dumps(job['result'], sort_keys=True)}")
        if job["last_error"]:
            typer.echo(f"  last error: {job['last_error']}")
        if line := estimates.job_line(loaded, job["id"]):
            typer.echo(f"  eta: {line}")
        for at, line in _timeline(job):
            typer.echo(f"  {_when(at)} {line}")


def register(root: typer.Typer) -> None:
    root.command("enqueue-order")(enqueue_order)
    root.add_typer(app, name="orders")
