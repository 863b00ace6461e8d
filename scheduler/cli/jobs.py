"""``portalq jobs ...``: list, show, retry, answer, approve, reject and cancel jobs.

Every change is audited like the console's (``jobs.admin.actions``): the change and its
audit row commit together; errors are one line and a non-zero exit (``scheduler.cli``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from portalq.jobs import audit, queue, waiting
from portalq.jobs.admin import actions
from portalq.jobs.audit import Actor
from portalq.jobs.errors import InputError
from portalq.jobs.operations import approvals, questions
from portalq.jobs.secrets import sealing
from portalq.jobs.types import get
from portalq.scheduler.cli.common import DbUrl, cli_actor, fail, load_payload, print_json, use_url

app = typer.Typer(no_args_is_help=True, help="Inspect and manage jobs.")


def public(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job for display: secret payload fields shown as [encrypted] or [erased]."""
    out = dict(job)
    try:
        secret_fields = get(job["job_type"]).secret_fields
    except InputError:
        secret_fields = ()
    payload = json.loads(json.dumps(out.get("payload") or {}))
    out["payload"] = sealing.for_display(job, payload) if secret_fields else payload
    if "checkpoint" in out:
        out["checkpoint"] = sealing.checkpoint_for_display(out["checkpoint"])
    for column in ("rate_key", "secret_key_id", "secret_dek", "secret_data"):
        out.pop(column, None)
    return out


@app.command("list")
def jobs_list(
    status: Annotated[str | None, typer.Option()] = None,
    portal: Annotated[str | None, typer.Option()] = None,
    order: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option()] = 100,
    waits: Annotated[bool, typer.Option(
        "--waiting", help="only the jobs waiting on their portal's decision: since when, "
        "expected by when, next check")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    database_url: DbUrl = None,
) -> None:
    """List jobs, newest first (--waiting: those waiting on a portal, expected soonest first)."""
    if waits:
        if status is not None:
            fail("--waiting lists deferred jobs waiting on a portal: it cannot be combined "
                 "with --status")
        use_url(database_url)
        _list_waiting(queue.list_waiting(portal=portal, order_id=order, limit=limit),
                      as_json)
        return
    use_url(database_url)
    rows = queue.list_jobs(status=status, portal=portal, order_id=order, limit=limit)
    if as_json:
        print_json(rows)
        return
    typer.echo(f"{'ID':>7}  {'TYPE':<13} {'ORDER':<12} {'PORTAL':<20} {'STATUS':<10} "
               f"{'TRY':>5}  RUN AT")
    for r in rows:
        typer.echo(f"{r['id']:>7}  {r['job_type']:<13} {r['order_id']:<12} {r['portal']:<20} "
                   f"{r['status']:<10} {r['attempts']:>2}/{r['max_attempts']:<2}  "
                   f"{r['run_at']:%Y-%m-%d %H:%M:%SZ}")


def _list_waiting(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
        return

    def at(iso: Any) -> str:
        return f"{datetime.fromisoformat(str(iso)).astimezone(UTC):%Y-%m-%d %H:%MZ}"

    typer.echo(f"{'ID':>7}  {'TYPE':<13} {'ORDER':<12} {'PORTAL':<20} {'SINCE':<17} "
               f"{'EXPECTED BY':<17} NEXT CHECK")
    for r in rows:
        late = "  overdue" if r["overdue"] else ""
        typer.echo(f"{r['id']:>7}  {r['job_type']:<13} {r['order_id']:<12} {r['portal']:<20} "
                   f"{at(r['since']):<17} {at(r['expected_by']):<17} "
                   f"{at(r['next_check'])}{late}")


@app.command("show")
def jobs_show(job_id: int, as_json: Annotated[bool, typer.Option("--json")] = False,
              database_url: DbUrl = None) -> None:
    """A job with its events, artifacts and documents."""
    use_url(database_url)
    job = public(queue.show_job(job_id))
    mark = waiting.marker(job["checkpoint"])
    estimate = None
    if job["status"] in ("pending", "deferred"):
        # the estimator (calendars, the replay) only for the commands that show an ETA
        from portalq.scheduler import estimates
        estimate = estimates.job_eta(estimates.load_fresh()[0], job_id)
    if as_json:   # everything the text shows (its ETA and waiting line) for a program too
        print_json({**job, "eta": estimate,
                    "waiting": {**mark, "text": waiting.describe(mark)} if mark else None})
        return
    for key in ("id", "job_type", "order_id", "portal", "status", "priority", "attempts",
                "max_attempts", "crashes", "run_at", "last_error", "created_at", "finished_at"):
        typer.echo(f"{key:>13}: {job[key]}")
    if shown := waiting.describe(mark):
        typer.echo(f"{'waiting':>13}: {shown}")   # submitted; the registry decides later
    if estimate is not None:
        typer.echo(f"{'eta':>13}: {estimate['text']}")
    typer.echo(f"{'payload':>13}: {json.dumps(job['payload'], sort_keys=True)}")
    typer.echo(f"{'checkpoint':>13}: {json.dumps(job['checkpoint'], sort_keys=True)}")
    typer.echo(f"{'result':>13}: {json.dumps(job['result'], sort_keys=True)}")
    typer.echo("events:")
    for e in job["events"]:
        err = f"  error: {e['error']}" if e["error"] else ""
        detail = e.get("detail") or {}
        what = f" [{detail['event']}]" if isinstance(detail, dict) and detail.get("event") else ""
        if isinstance(detail, dict) and detail.get("crash"):
            what = f" [crash {detail['crash']}: its worker died; attempt refunded]"
        typer.echo(f"  {e['at']:%Y-%m-%d %H:%M:%S}Z #{e['attempt']} {e['from_status'] or '-'}"
                   f" -> {e['to_status']} {e['worker'] or ''}{what}{err}")
    if job["artifacts"]:
        typer.echo("artifacts:")
        for a in job["artifacts"]:
            note = f" ({a['note']})" if a.get("note") else ""
            typer.echo(f"  attempt {a['attempt']} {a['kind']}: {a['path']}{note}")
    if job["documents"]:
        typer.echo("documents:")
        for d in job["documents"]:
            typer.echo(f"  {d['name']} ({d['content_type']}, {d['size']} bytes)")


@app.command("retry")
def jobs_retry(
    job_id: int,
    payload_patch: Annotated[str | None, typer.Option(help="JSON merged into the payload")] = None,
    note: Annotated[str | None, typer.Option(help="why (kept in the job's events)")] = None,
    confirmed_filed: Annotated[str | None, typer.Option(
        help="the portal did accept it: complete the job with this confirmation")] = None,
    not_filed: Annotated[bool, typer.Option(
        help="the portal did not get it: resume from before the submission")] = False,
    database_url: DbUrl = None,
) -> None:
    """Put a failed or cancelled job back in the queue (checkpoints kept), or resolve an
    uncertain outcome (--confirmed-filed / --not-filed)."""
    if confirmed_filed is not None and not_filed:
        fail("give --confirmed-filed or --not-filed, not both")
    if payload_patch is not None and (confirmed_filed is not None or not_filed):
        fail("--payload-patch does not go with --confirmed-filed or --not-filed")
    patch = (load_payload(payload_patch, None, "--payload-patch")
             if payload_patch is not None else None)
    use_url(database_url)
    reason = note or "portalq jobs retry"
    if confirmed_filed is not None:
        _audited("job.confirm_filed", job_id, reason, lambda c: queue.resolve_filed(
            job_id, confirmed_filed, actor=cli_actor(), note=note, conn=c))
        typer.echo(f"job {job_id} completed as filed ({confirmed_filed.strip()})")
        return
    if not_filed:
        _audited("job.not_filed", job_id, reason, lambda c: queue.resolve_not_filed(
            job_id, actor=cli_actor(), note=note, conn=c))
        typer.echo(f"job {job_id} resumes from before its submission")
        return
    _audited("job.retry_with_payload" if patch else "job.retry", job_id, reason,
             lambda c: queue.retry(job_id, payload_patch=patch, note=note, actor=cli_actor(),
                                   conn=c))
    typer.echo(f"job {job_id} queued again")


def _audited(action: str, job_id: int, reason: str, change: Any) -> None:
    """An admin change of a job and its audit row (who, what, when, why, before/after),
    committed together -- as the console records its actions."""
    queue.get_job(job_id)   # an unknown id: one line, exit 2
    with queue.connect() as conn:
        actions.job_action(conn, Actor(cli_actor(), None, "cli"), action, job_id,
                                   reason, lambda: change(conn))


@app.command("answer")
def answer(job_id: int,
           code: Annotated[str, typer.Option("--code", help="the answer: a code, the CAPTCHA's "
                                                            "characters, yes/no")],
           database_url: DbUrl = None) -> None:
    """Answer the question a running job is waiting on (from any host)."""
    use_url(database_url)
    queue.get_job(job_id)   # an unknown id: one line, exit 2
    with queue.connect() as conn:
        asked = questions.answer(conn, job_id, code, by=cli_actor())
        audit.record(conn, audit.Actor(cli_actor(), None, "cli"), "job.answer", f"job:{job_id}",
                     f"answered: {asked[:200]}")   # never the answer itself
    typer.echo(f"job {job_id}: answered")


@app.command("approve")
def approve(job_id: int, note: Annotated[str | None, typer.Option("--note")] = None,
            database_url: DbUrl = None) -> None:
    """Approve what a job waiting at its review page would submit: it runs again at once and
    submits only if the review page still shows exactly that."""
    _decide(job_id, "approved", note or "portalq jobs approve", database_url)
    typer.echo(f"job {job_id}: approved")


@app.command("reject")
def reject(job_id: int, note: Annotated[str, typer.Option("--note", help="why")],
           database_url: DbUrl = None) -> None:
    """Reject a job waiting at its review page: cancelled, nothing filed."""
    _decide(job_id, "rejected", note, database_url)
    typer.echo(f"job {job_id}: rejected (cancelled, nothing filed)")


def _decide(job_id: int, state: str, note: str, database_url: str | None) -> None:
    use_url(database_url)
    queue.get_job(job_id)   # an unknown id: one line, exit 2
    with queue.connect() as conn:
        approvals.decide(conn, audit.Actor(cli_actor(), None, "cli"), job_id, state, note)


@app.command("cancel")
def jobs_cancel(job_id: int, database_url: DbUrl = None) -> None:
    """Cancel a pending, deferred or failed job."""
    use_url(database_url)
    _audited("job.cancel", job_id, "portalq jobs cancel",
             lambda c: queue.cancel(job_id, actor=cli_actor(), conn=c))
    typer.echo(f"job {job_id} cancelled")
