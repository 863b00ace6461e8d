"""Helpers shared by the CLI modules: one-line errors, JSON output, input parsing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

EXIT_INPUT = 2
EXIT_STATE = 3
EXIT_DB = 4


def fail(message: str, code: int = EXIT_INPUT) -> NoReturn:
    typer.echo(f"portalq: error: {message}", err=True)
    raise typer.Exit(code)


def database_error(exc: BaseException) -> tuple[int | None, str]:
    """(exit code, one-line message) for a database error, else (None, ""). SQLAlchemy's
    wrappers are unwrapped. The server's message text is shown only for connection
    failures (it names host and port, never the password); any other error is named by its
    class and SQLSTATE: its text may quote a value (a payload's SSN)."""
    import sys

    import psycopg

    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is not None and isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if not isinstance(exc, psycopg.Error):
        return None, ""
    if isinstance(exc, psycopg.OperationalError) and not isinstance(
            exc, psycopg.errors.ProgramLimitExceeded | psycopg.errors.QueryCanceled):
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        timeout_class = getattr(psycopg.errors, "ConnectionTimeout", ())
        if isinstance(exc, timeout_class) or "timeout expired" in first:
            first = ("no answer within the connect timeout "
                     f"(PORTALQ_CONNECT_TIMEOUT_SECONDS): {first}")
        return EXIT_DB, f"database unavailable: {first}"
    state = f"SQLSTATE {exc.sqlstate}" if exc.sqlstate else "refused by the client library"
    if isinstance(exc, psycopg.DataError | psycopg.IntegrityError
                  | psycopg.errors.ProgramLimitExceeded):
        return EXIT_INPUT, f"the database refused a value ({type(exc).__name__}, {state})"
    return 1, f"database error ({type(exc).__name__}, {state})"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2, sort_keys=True))


def _parse_instant(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    from jobs.clock import parse_instant

    try:
        return parse_instant(value)
    except ValueError as exc:
        fail(f"{what}: {exc}")


def read_bounded(path: Path, limit: int, what: str) -> str:
    """A text file of at most ``limit`` bytes, UTF-8 (one-line error otherwise). Reads no
    more than ``limit + 1`` bytes: /dev/zero or a huge file cannot exhaust memory."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        fail(f"cannot read {what} {path}: {exc.strerror}")
    if len(data) > limit:
        fail(f"{what} {path} is larger than {limit} bytes (PORTALQ_MAX_PAYLOAD_BYTES)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{what} {path} is not UTF-8 text (byte {exc.start})")


def _load_payload(payload: str | None, payload_file: Path | None,
                  what: str = "payload") -> dict[str, Any]:
    from jobs.limits import max_payload_bytes

    if payload is not None and payload_file is not None:
        fail("give --payload or --payload-file, not both")
    text = payload
    if payload_file is not None:
        text = read_bounded(payload_file, max_payload_bytes(), "payload file")
    if text is None:
        return {}
    if len(text.encode("utf-8", "surrogatepass")) > max_payload_bytes():
        fail(f"{what} is larger than {max_payload_bytes()} bytes (PORTALQ_MAX_PAYLOAD_BYTES)")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except RecursionError:
        fail(f"{what} is nested too deeply")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object")
    return value


DbUrl = Annotated[str | None, typer.Option("--database-url", envvar="PORTALQ_DATABASE_URL",
                                           help="PostgreSQL URL (default: embedded server)")]


def _use_url(url: str | None) -> None:
    import os

    if url:
        os.environ["PORTALQ_DATABASE_URL"] = url




def cli_actor() -> str:
    """Who acts from the CLI, for the audit log: the OS user (and host)."""
    import getpass
    import socket

    try:
        return f"cli:{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # noqa: BLE001 - no user name to be had (a bare container)
        return "cli"
