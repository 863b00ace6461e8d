"""The ``portalq`` command line. Every option can also come from a ``PORTALQ_*`` variable.

This room of the service holds the command line alone: the app and its top-level commands
here, each group in a module beside it (``jobs``, ``portals``, ``keys``, ``accounts``,
``webhooks``, ``orders``, ``adopt``, ``console`` for the console's users and the audit log),
their shared parts in ``common`` and the batch reader in ``batch``.

Errors are one line on stderr (``portalq: error: ...``) and a non-zero exit; a command that
fails on bad input writes nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from portalq.jobs import queue
from portalq.jobs import settings as all_settings
from portalq.jobs.business import supplied
from portalq.jobs.business.orders import payload_for_order
from portalq.jobs.db import migrate as m
from portalq.jobs.db.location import database_url as resolve
from portalq.jobs.db.location import embedded, parse_url
from portalq.jobs.errors import BatchInputError, IllegalTransition, InputError, PortalqError
from portalq.scheduler.calendar_cache import seed_declared_portals, store_holidays
from portalq.scheduler.cli import (
    accounts,
    adopt,
    console,
    jobs,
    keys,
    orders,
    portals,
    webhooks,
)
from portalq.scheduler.cli.batch import chunks
from portalq.scheduler.cli.common import (
    DbUrl,
    ExitCode,
    database_error,
    fail,
    load_payload,
    parse_when,
    print_json,
    use_url,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="portalq: portal-automation job scheduler")
db_app = typer.Typer(no_args_is_help=True, help="The embedded database server.")
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
        print_json(jobs.public({**queue.get_job(result.id), "created": result.created}))
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

    terminal = Console()   # (``console`` is the console's commands, cli/console.py)
    if once:
        terminal.print(st.render(st.snapshot()))
        return
    # rich only for the commands that draw with it: the CLI starts small
    from rich.live import Live

    with Live(st.render(st.snapshot()), console=terminal, refresh_per_second=4) as live:
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
    app.add_typer(jobs.app, name="jobs")
    app.add_typer(portals.app, name="portals")
    app.add_typer(webhooks.app, name="webhooks")
    app.add_typer(keys.app, name="keys")
    app.add_typer(accounts.app, name="accounts")
    console.register(app)
    adopt.register(app)
    orders.register(app)


def _usage_error(exc: Exception) -> tuple[str, bool] | None:
    """What to print for a command-line error, and whether on stderr; None for any other
    error. Click's errors are known by their shape (``format_message()`` and an int
    ``exit_code``): typer vendors click in a private module, which portalq does not import.
    A missing subcommand prints the help (stdout); a usage error is one line (stderr)."""
    message = getattr(exc, "format_message", None)
    if not callable(message) or not isinstance(getattr(exc, "exit_code", None), int):
        return None
    if type(exc).__name__ == "NoArgsIsHelpError":
        return str(message()), False
    return f"portalq: error: {message()}", True


def main(argv: list[str] | None = None) -> None:
    try:
        _register()   # a bad setting read at import (the clock's): one line, as below
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
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
        usage = _usage_error(exc)
        if usage is not None:
            text, to_stderr = usage
            typer.echo(text, err=to_stderr)
            sys.exit(ExitCode.BAD_INPUT)
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
    # the service's modules load only for the command that runs them
    from portalq.scheduler import node_keys

    try:   # a key file that is not a keyring: one line at start (a missing one is logged)
        node_keys.check_key_file()
    except PortalqError as exc:
        fail(str(exc))
    run(settings)
