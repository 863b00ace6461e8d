"""``portalq console``, ``portalq users ...``, ``portalq audit`` and ``portalq search``."""

from __future__ import annotations

import socket
import sys
from importlib.util import find_spec
from typing import Annotated

import typer
from pydantic import ValidationError

from portalq.jobs import audit as audit_log
from portalq.jobs import queue, search_index
from portalq.jobs.db import migrate
from portalq.jobs.db.location import database_url as resolve
from portalq.jobs.db.location import libpq_dsn
from portalq.jobs.errors import InputError
from portalq.scheduler.cli.common import (
    DbUrl,
    ExitCode,
    cli_actor,
    fail,
    print_json,
    printable,
    use_url,
)

users_app = typer.Typer(no_args_is_help=True, help="Console users and their roles.")
search_app = typer.Typer(no_args_is_help=True, help="The console search's index.")

#: what the console and its users need beyond the base install (the console extra)
CONSOLE_MODULES = ("starlette", "uvicorn", "python_multipart", "argon2", "itsdangerous",
                   "asgi_csrf", "authlib", "joserfc", "httpx2")
#: what the message tells an operator to run
CONSOLE_EXTRA = "pip install 'portalq[console]'"


def needs_console_extra() -> None:
    """One line and exit 2 when the console's packages are not installed (a base install:
    the queue, the service and the CLI)."""
    missing = [name for name in CONSOLE_MODULES if find_spec(name) is None]
    if missing:
        fail(f"the console is not installed (no {', '.join(missing)}): {CONSOLE_EXTRA}")


@users_app.callback()
def _users() -> None:
    needs_console_extra()


def _password(confirm: bool) -> str:
    """From standard input when it is not a terminal (first line), else a prompt."""
    if not sys.stdin.isatty():
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            fail("no password on standard input")
        return line
    return str(typer.prompt("password", hide_input=True, confirmation_prompt=confirm))


def _audit_cli(conn: object, action: str, target: str, reason: str, after: object) -> None:
    audit_log.record(conn, audit_log.Actor(cli_actor(), None, "cli"), action, target, reason,
                 after=after)


@users_app.command("add")
def users_add(name: str,
              role: Annotated[str, typer.Option(help="viewer | operator | admin")] = "viewer",
              database_url: DbUrl = None) -> None:
    """Add a console user; the password comes from standard input or a prompt."""
    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    from portalq.jobs.admin import users

    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    if role not in users.RANK:
        fail(f"unknown role {role!r} (one of viewer, operator, admin)")
    password = _password(confirm=True)
    use_url(database_url)
    with queue.connect() as c, c.transaction():
        row = users.add_user(c, name, role, password)
        _audit_cli(c, "user.add", f"user:{row['name']}", "portalq users add",
                   {"role": row["role"]})
    typer.echo(f"user {row['name']} added ({row['role']})")


@users_app.command("passwd")
def users_passwd(name: str, database_url: DbUrl = None) -> None:
    """Set a user's password (standard input or a prompt)."""
    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    from portalq.jobs.admin import users

    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    password = _password(confirm=True)
    use_url(database_url)
    with queue.connect() as c, c.transaction():
        users.set_password(c, name, password)
        _audit_cli(c, "user.passwd", f"user:{name}", "portalq users passwd", None)
    typer.echo(f"password of {name} changed")


@users_app.command("disable")
def users_disable(name: str, database_url: DbUrl = None) -> None:
    """Disable a user: their sessions end at once, they cannot sign in."""
    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    from portalq.jobs.admin import users

    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    use_url(database_url)
    with queue.connect() as c, c.transaction():
        users.disable(c, name)
        _audit_cli(c, "user.disable", f"user:{name}", "portalq users disable", None)
    typer.echo(f"user {name} disabled")


@users_app.command("list")
def users_list(as_json: Annotated[bool, typer.Option("--json")] = False,
               database_url: DbUrl = None) -> None:
    """Console users, roles, last activity."""
    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    from portalq.jobs.admin import users

    # argon2 (password hashing) only for the users commands: the CLI's start stays small
    use_url(database_url)
    with queue.connect() as c:
        rows = users.users(c)
    if as_json:
        print_json(rows)
        return
    typer.echo(f"{'NAME':<24} {'ROLE':<9} {'STATE':<9} {'SIGN-IN':<9} LAST SEEN")
    for r in rows:
        seen = f"{r['last_seen_at']:%Y-%m-%d %H:%M}Z" if r["last_seen_at"] else "-"
        typer.echo(f"{r['name']:<24} {r['role']:<9} "
                   f"{'disabled' if r['disabled_at'] else 'active':<9} "
                   f"{'sso' if r.get('sso') else 'password':<9} {seen}")


def audit(target: Annotated[str | None, typer.Option(help="e.g. job:42, portal:irs_ein")] = None,
          actor: Annotated[str | None, typer.Option(help="who")] = None,
          action: Annotated[str | None, typer.Option(help="e.g. job.retry")] = None,
          limit: Annotated[int, typer.Option()] = 50,
          as_json: Annotated[bool, typer.Option("--json")] = False,
          database_url: DbUrl = None) -> None:
    """The audit log, newest first: who did what, when, why (before/after with --json)."""
    use_url(database_url)
    with queue.connect() as c:
        rows = audit_log.entries(c, target=target, actor=actor, action=action, limit=limit)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        typer.echo(printable(f"{r['id']:>6}  {r['at']:%Y-%m-%d %H:%M:%S}Z  {r['actor']:<20} "
                             f"{r['action']:<24} {r['target']:<20} {r['reason']}"))


def console(host: Annotated[str | None, typer.Option(
                help="address to listen on [env PORTALQ_CONSOLE_HOST, default 127.0.0.1]")] = None,
            port: Annotated[int | None, typer.Option(
                help="port [env PORTALQ_CONSOLE_PORT, default 8780]")] = None,
            database_url: DbUrl = None) -> None:
    """Serve the admin console (sign in with a user from `portalq users add`)."""
    needs_console_extra()
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler.console.app import serve
    from portalq.scheduler.console.signing_key import ConsoleSettings

    overrides: dict[str, object] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    try:
        settings = ConsoleSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        fail(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}")
    # the service, console and flows load only for the command that runs them
    from portalq.scheduler.config import Settings
    from portalq.scheduler.console.oidc import Config
    from portalq.scheduler.console.signing_key import secret_key

    try:  # single sign-on half configured, a short secret: one line before anything starts
        Config.from_settings(settings, Settings())
        secret_key(settings)
    except InputError as exc:
        fail(str(exc))
    try:  # a busy port is one line, not a server start-up traceback
        with socket.create_server((settings.host, settings.port)):
            pass
    except OSError as exc:
        reason = (exc.strerror or str(exc)).split(" (while")[0]
        fail(f"cannot listen on {settings.host}:{settings.port}: {reason}", code=ExitCode.REFUSED)
    use_url(database_url)
    url = resolve(None)
    migrate.upgrade_if_needed(url)
    typer.echo(f"portalq console on http://{settings.host}:{settings.port}/", err=True)
    serve(libpq_dsn(url), settings)


@search_app.command("rebuild")
def search_rebuild(database_url: DbUrl = None) -> None:
    """Rebuild the console search's index from the jobs (the service's indexer keeps it up
    to date; this starts it over). Searches meanwhile read the queue itself."""
    use_url(database_url)
    with queue.connect() as c:
        search_index.rebuild(c)
        typer.echo(f"search index rebuilt: indexed up to job {search_index.mark(c).indexed_to}")


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
    app.add_typer(search_app, name="search")
    app.command("audit")(audit)
    app.command("console")(console)
