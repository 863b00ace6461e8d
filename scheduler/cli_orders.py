"""``portalq orders show ORD-1001 [--json]``: what became of one of the business's orders --
every job of it, its status, its result and its timeline (:mod:`jobs.results`: nothing
secret is shown)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from portalq.scheduler.cli_common import DbUrl, _use_url, print_json

app = typer.Typer(no_args_is_help=True, help="The business's orders: what became of them.")


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
    from portalq.jobs import results

    _use_url(database_url)
    view = results.order(order_id)
    if as_json:
        print_json(view)
        return
    typer.echo(f"order {view['order_id']}: {len(view['jobs'])} job(s)")
    for job in view["jobs"]:
        typer.echo(f"\njob {job['id']} {job['job_type']} on {job['portal']}: {job['status']}"
                   f" (attempt {job['attempts']}/{job['max_attempts']}, "
                   f"finished {_when(job['finished_at'])})")
        typer.echo(f"  result: {json.dumps(job['result'], sort_keys=True)}")
        if job["last_error"]:
            typer.echo(f"  last error: {job['last_error']}")
        for at, line in _timeline(job):
            typer.echo(f"  {_when(at)} {line}")
