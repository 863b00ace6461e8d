"""The ``portalq`` command line. Every option can also come from a ``PORTALQ_*`` variable.

Errors are one line on stderr (``portalq: error: ...``) and a non-zero exit; a command that
fails on bad input writes nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]

import asyncio
import importlib.util
import itertools
import time

from pydantic import ValidationError

from portalq.jobs import audit, queue, waiting
from portalq.jobs import settings as all_settings
from portalq.jobs.admin import actions as console_actions
from portalq.jobs.audit import Actor
from portalq.jobs.business import supplied
from portalq.jobs.business.orders import payload_for_order
from portalq.jobs.db import migrate as m
from portalq.jobs.db.location import database_url as resolve
from portalq.jobs.db.location import embedded, parse_url
from portalq.jobs.errors import BatchInputError, IllegalTransition, InputError, PortalqError
from portalq.jobs.operations import approvals, questions
from portalq.jobs.secrets import sealing as secrets_at_rest
from portalq.jobs.types import get
from portalq.scheduler import (
    cli_accounts,
    cli_adopt,
    cli_console,
    cli_keys,
    cli_orders,
    cli_portals,
    cli_webhooks,
)
from portalq.scheduler.calendar_cache import seed_declared_portals, store_holidays
from portalq.scheduler.cli_batch import chunks
from portalq.scheduler.cli_common import (
    DbUrl,
    ExitCode,
    cli_actor,
    database_error,
    fail,
    load_payload,
    parse_when,
    print_json,
    use_url,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="portalq: portal-automation job scheduler")
jobs_app = typer.Typer(no_args_is_help=True, help="Inspect and manage jobs.")
db_app = typer.Typer(no_args_is_help=True, help="The embedded database server.")
app.add_typer(jobs_app, name="jobs")
app.add_typer(db_app, name="db")



@app.command()
def migrate(database_url: DbUrl = None,
            sql: Annotated[bool, typer.Option("--sql", help="print the SQL, run nothing")] = False,
            ) -> None:
    """Apply schema migrations (idempotent)."""
    if sql:
        typer.echo(m.offline_sql())
        return
    # rich only for the commands that draw with it: the CLI starts small
    from rich.console import Console


    with Console(stderr=True).status("starting the database and applying migrations ..."):
        url = resolve(database_url)
        before = m.current(url)
        m.upgrade(url)
        after = m.current(url)

        added = seed_declared_portals(url)
        stored = store_holidays(url)
    typer.echo(f"schema at {after}" + ("" if before == after else f" (was {before or 'empty'})"))
    if added:
        typer.echo(f"portals added: {', '.join(added)}")
    if stored:
        typer.echo(f"holidays stored for {', '.join(stored)}")


@app.command()
def enqueue(
    job_type: Annotated[str, typer.Argument(help="file_entity, obtain_ein, name_search, ...")],
    order: Annotated[str, typer.Option("--order", envvar="PORTALQ_ORDER", help="order id")],
    payload: Annotated[str | None, typer.Option(
        help="payload as JSON (default: built from the order, jobs/business/orders.py)")] = None,
    payload_file: Annotated[Path | None, typer.Option(help="payload JSON file")] = None,
    portal: Annotated[str | None, typer.Option(help="portal code (default: by type)")] = None,
    run_at: Annotated[str | None, typer.Option(help="ISO 8601 instant")] = None,
    priority: Annotated[int, typer.Option(envvar="PORTALQ_PRIORITY")] = 0,
    max_attempts: Annotated[int, typer.Option(envvar="PORTALQ_MAX_ATTEMPTS")] = 5,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the job row")] = False,
    document: Annotated[Path | None, typer.Option(
        help="a PDF the business supplies (file_entity DE: its signed certificate), "
             "stored sealed with the job")] = None,
    database_url: DbUrl = None,
) -> None:
    """Enqueue one job; prints its id. Without --payload the payload is built from the order
    by the job type's order source."""
    given = payload is not None or payload_file is not None
    data = load_payload(payload, payload_file) if given else None
    when = parse_when(run_at, "--run-at")
    use_url(database_url)
    if data is None:

        data = payload_for_order(job_type, order)
    options: dict[str, Any] = {"run_at": when, "priority": priority,
                               "max_attempts": max_attempts,
                               "idempotency_key": idempotency_key, "portal": portal}
    if document is None:
        result = queue.enqueue(job_type, order, data, **options)
    else:
        supplied.check_accepted(job_type, data)
        name, pdf = supplied.read_pdf(document)   # checked before anything is written
        with queue.connect() as conn, conn.transaction():   # the job with its document
            result = queue.enqueue(job_type, order, data, conn=conn, **options)
            if result.created:
                supplied.attach(conn, result.id, name, pdf)
    if as_json:
        print_json(_public({**queue.get_job(result.id), "created": result.created}))
    else:
        typer.echo(result.id)


@app.command("enqueue-batch")
def enqueue_batch(
    path: Annotated[Path, typer.Argument(help="JSON lines: one job per line, e.g. "
                                         '{"job_type": "name_search", "order": "ORD-1", '
                                         '"payload": {...}, "priority": 0, '
                                         '"idempotency_key": "..."}')],
    chunk: Annotated[int, typer.Option(help="jobs per INSERT statement")] = 1000,
    database_url: DbUrl = None,
) -> None:
    """Enqueue many jobs from a file, in one transaction: all of them or (on any bad line)
    none; prints how many were created and how many already existed."""
    # rich only for the commands that draw with it: the CLI starts small
    from rich.progress import Progress


    if chunk < 1:
        fail(f"--chunk must be at least 1, got {chunk}")
    parts = chunks(path, chunk)
    # the first chunk is read (and checked) before connecting: a bad file is an input
    # error (exit 2) even with the database down
    first = next(parts, None)
    use_url(database_url)
    created = existing = 0
    size = path.stat().st_size if path.is_file() else None
    with queue.connect() as conn, Progress(transient=True) as progress:
        task = progress.add_task("enqueueing", total=size)
        for part, numbers, done in itertools.chain([first] if first else [], parts):
            try:
                results = queue.enqueue_many(part, conn)
            except BatchInputError as exc:
                conn.rollback()
                fail(f"{path}:{numbers[exc.index]}: {exc.detail}")
            except InputError as exc:
                conn.rollback()
                where = numbers[0] if len(part) == 1 else f"{numbers[0]}..{numbers[-1]}"
                fail(f"{path}:{where}: {exc}")
            created += sum(r.created for r in results)
            existing += sum(not r.created for r in results)
            progress.update(task, completed=done)
    typer.echo(f"{created} job(s) enqueued, {existing} already existed")


def _public(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job for display: secret payload fields shown as [encrypted] or [erased]."""
    out = dict(job)
    try:
        secret_fields = get(job["job_type"]).secret_fields
    except InputError:
        secret_fields = ()
    payload = json.loads(json.dumps(out.get("payload") or {}))
    out["payload"] = secrets_at_rest.for_display(job, payload) if secret_fields else payload
    if "checkpoint" in out:
        out["checkpoint"] = secrets_at_rest.checkpoint_for_display(out["checkpoint"])
    for column in ("rate_key", "secret_key_id", "secret_dek", "secret_data"):
        out.pop(column, None)
    return out


@jobs_app.command("list")
def jobs_list(
    status: Annotated[str | None, typer.Option()] = None,
    portal: Annotated[str | None, typer.Option()] = None,
    order: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option()] = 100,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    database_url: DbUrl = None,
) -> None:
    """List jobs, newest first."""
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


@jobs_app.command("show")
def jobs_show(job_id: int, as_json: Annotated[bool, typer.Option("--json")] = False,
              database_url: DbUrl = None) -> None:
    """A job with its events, artifacts and documents."""
    use_url(database_url)
    job = _public(queue.show_job(job_id))
    if as_json:
        print_json(job)
        return
    for key in ("id", "job_type", "order_id", "portal", "status", "priority", "attempts",
                "max_attempts", "crashes", "run_at", "last_error", "created_at", "finished_at"):
        typer.echo(f"{key:>13}: {job[key]}")
    if shown := waiting.describe(waiting.marker(job["checkpoint"])):
        typer.echo(f"{'waiting':>13}: {shown}")   # submitted; the registry decides later
    if job["status"] in ("pending", "deferred"):
        # the estimator (calendars, the replay) only for the commands that show an ETA
        from portalq.scheduler import estimates as eta
        if line := eta.job_line(eta.load_fresh()[0], job_id):
            typer.echo(f"{'eta':>13}: {line}")
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


@jobs_app.command("retry")
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
        console_actions.job_action(conn, Actor(cli_actor(), None, "cli"), action, job_id,
                                   reason, lambda: change(conn))


@jobs_app.command("answer")
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


@jobs_app.command("approve")
def approve(job_id: int, note: Annotated[str | None, typer.Option("--note")] = None,
            database_url: DbUrl = None) -> None:
    """Approve what a job waiting at its review page would submit: it runs again at once and
    submits only if the review page still shows exactly that."""
    _decide(job_id, "approved", note or "portalq jobs approve", database_url)
    typer.echo(f"job {job_id}: approved")


@jobs_app.command("reject")
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


@jobs_app.command("cancel")
def jobs_cancel(job_id: int, database_url: DbUrl = None) -> None:
    """Cancel a pending, deferred or failed job."""
    use_url(database_url)
    _audited("job.cancel", job_id, "portalq jobs cancel",
             lambda c: queue.cancel(job_id, actor=cli_actor(), conn=c))
    typer.echo(f"job {job_id} cancelled")


@app.command()
def status(once: Annotated[bool, typer.Option("--once", help="one snapshot, then exit")] = False,
           as_json: Annotated[bool, typer.Option("--json", help="one JSON snapshot")] = False,
           interval: Annotated[float, typer.Option(help="refresh period (s)")] = 1.0,
           database_url: DbUrl = None) -> None:
    """Live view: queue depth, running jobs and their step, deferred jobs, failures."""
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler import status as st

    if not 0 < interval <= 3600:
        fail(f"--interval must be in (0, 3600] seconds, got {interval}")
    use_url(database_url)
    if as_json:
        print_json(st.snapshot())
        return
    # rich only for the commands that draw with it: the CLI starts small
    from rich.console import Console

    console = Console()
    if once:
        console.print(st.render(st.snapshot()))
        return
    # rich only for the commands that draw with it: the CLI starts small
    from rich.live import Live

    with Live(st.render(st.snapshot()), console=console, refresh_per_second=4) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(st.render(st.snapshot()))
        except KeyboardInterrupt:
            pass


def _need_demo_extra() -> None:
    """The stand-ins and the demo mailbox are an extra: a production install lacks them."""
    missing = [m for m in ("fpdf", "aiosmtpd") if importlib.util.find_spec(m) is None]
    if missing:
        fail("the stand-in portals and the demo mailbox are not installed: "
             "pip install 'portalq[demo]'")


@app.command()
def demo(
    exit_when_done: Annotated[bool, typer.Option(
        "--exit-when-done", envvar="PORTALQ_DEMO_EXIT_WHEN_DONE",
        help="exit once every sample job is final and every escalation mailed "
             "(non-interactive runs)")] = False,
    timeout: Annotated[float, typer.Option(help="give up after this many seconds")] = 600,
) -> None:
    """Run the whole product on the zero-setup defaults with sample orders."""
    if not timeout > 0:
        fail(f"--timeout must be positive, got {timeout}")
    _need_demo_extra()
    # rich only for the commands that draw with it: the CLI starts small
    from rich.console import Console

    # the service, console and flows load only for the command that runs them
    from portalq.scheduler import demo as d
    from portalq.scheduler import logs

    logs.setup("text", "WARNING")
    rc = asyncio.run(d.run(exit_when_done=exit_when_done, timeout=timeout, console=Console()))
    raise typer.Exit(rc)


@app.command()
def standin(host: Annotated[str, typer.Option(envvar="PORTALQ_STANDIN_HOST")] = "127.0.0.1",
            port: Annotated[int, typer.Option(envvar="PORTALQ_STANDIN_PORT")] = 8765) -> None:
    """Serve the stand-in portals (BC Registries, IRS EIN, Delaware, CRTC) locally."""
    _need_demo_extra()
    # the service, console and flows load only for the command that runs them
    from portalq.portals.standin.server import serve

    if not 0 <= port <= 65535:
        fail(f"--port must be 0..65535, got {port}")
    serve(host, port)


@db_app.command("start")
def db_start() -> None:
    """Start the embedded PostgreSQL server (if not running); print its URL."""
    typer.echo(embedded().ensure_running())


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL server."""
    embedded().stop()
    typer.echo("stopped")


@db_app.command("url")
def db_url(database_url: DbUrl = None) -> None:
    """Print the database URL portalq uses (starting the embedded server if needed); a
    password is shown as ***."""
    typer.echo(parse_url(resolve(database_url)).redacted())


def _register() -> None:
    app.add_typer(cli_portals.app, name="portals")
    app.add_typer(cli_webhooks.app, name="webhooks")
    app.add_typer(cli_keys.app, name="keys")
    app.add_typer(cli_accounts.app, name="accounts")
    cli_console.register(app)
    cli_adopt.register(app)
    cli_orders.register(app)


def main(argv: list[str] | None = None) -> None:
    try:
        _register()   # a bad setting read at import (the clock's): one line, as below
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except click_exc.NoArgsIsHelpError as exc:
        typer.echo(exc.format_message() if hasattr(exc, "format_message") else str(exc))
        sys.exit(ExitCode.BAD_INPUT)
    except click_exc.UsageError as exc:
        typer.echo(f"portalq: error: {exc.format_message()}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("portalq: aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except IllegalTransition as exc:
        typer.echo(f"portalq: error: {exc}", err=True)
        sys.exit(ExitCode.REFUSED)
    except (InputError, PortalqError) as exc:
        typer.echo(f"portalq: error: {exc}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except Exception as exc:
        code, message = database_error(exc)
        if code is None:
            raise
        typer.echo(f"portalq: error: {message}", err=True)
        sys.exit(code)


@app.command("run")
def run_service(
    workers: Annotated[int | None, typer.Option(help="concurrent jobs in this process "
                                                "[env PORTALQ_WORKERS, default 4]")] = None,
    tick: Annotated[float | None, typer.Option(help="tick period in seconds "
                                               "[env PORTALQ_TICK_SECONDS, default 60]")] = None,
    portals: Annotated[str | None, typer.Option(
        "--portals", help="claim jobs of these portals only, comma-separated (this node's "
        "role) [env PORTALQ_PORTALS, default all]")] = None,
    job_types: Annotated[str | None, typer.Option(
        "--job-types", help="claim jobs of these types only, comma-separated "
        "[env PORTALQ_JOB_TYPES, default all]")] = None,
    database_url: DbUrl = None,
) -> None:
    """Run the scheduler service (until SIGTERM/SIGINT)."""
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler.config import Settings
    from portalq.scheduler.service import run

    overrides: dict[str, Any] = {}
    if workers is not None:
        overrides["workers"] = workers
    if tick is not None:
        overrides["tick_seconds"] = tick
    if database_url:
        overrides["database_url"] = database_url
    for name, value in (("portals", portals), ("job_types", job_types)):
        if value is not None:
            if not value.strip(", "):
                fail(f"--{name.replace('_', '-')} needs at least one name")
            overrides[name] = value
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        fail(message if message.startswith("invalid PORTALQ_")
             else f"invalid setting PORTALQ_{field.upper()}: {message}")
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler.mailer import SmtpUrlError, smtp_target

    try:   # at start, not when the first escalation is mailed (its text, never shown)
        smtp_target(settings.smtp_url)
    except SmtpUrlError as exc:
        fail(str(exc))

    # the service, console and flows load only for the command that runs them
    from portalq.scheduler import egress

    try:   # a malformed proxy setting: one line at start (the portals are checked later)
        egress.proxies(all_settings.family(egress.PREFIX))
    except InputError as exc:
        fail(str(exc))
    run(settings)
