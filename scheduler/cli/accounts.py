"""``portalq accounts ...``: the portal accounts flows sign in with (jobs/operations/accounts.py).

    portalq accounts list [--portal P] [--json]
    portalq accounts add PORTAL NAME --username U   (secrets: jobs/secrets/account_secrets.py)
    portalq accounts pause|resume PORTAL NAME --reason "..."
    portalq accounts check PORTAL NAME                 signs in once, says what it found

Every change is audited like the console's actions.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from portalq.jobs import files, queue
from portalq.jobs.audit import Actor
from portalq.jobs.errors import AccountError, HandlerOutcome
from portalq.jobs.operations import accounts, portal_rows
from portalq.jobs.secrets import account_secrets
from portalq.scheduler.cli.common import (
    DbUrl,
    ExitCode,
    cli_actor,
    fail,
    print_json,
    printable,
    use_url,
)

app = typer.Typer(no_args_is_help=True, help="Portal accounts: list, add, pause, resume, check.")

Reason = Annotated[str | None, typer.Option("--reason", help="why (kept in the audit log)")]


def _actor() -> Actor:
    return Actor(cli_actor(), None, "cli")


@app.command("list")
def list_accounts(portal: Annotated[str | None, typer.Option()] = None,
                  as_json: Annotated[bool, typer.Option("--json")] = False,
                  database_url: DbUrl = None) -> None:
    """Accounts, their state, and which of their secrets the provider has (never values)."""
    use_url(database_url)
    with queue.connect() as conn:
        rows = accounts.listing(conn, portal)
    for r in rows:
        r["secrets"] = account_secrets.present(r["portal"], r["name"])
    if as_json:
        print_json(rows)
        return
    if not rows:
        typer.echo("no accounts")
    for r in rows:
        state = f"paused ({r['paused_by']}: {r['pause_reason']})" if r["paused_at"] else "active"
        have = ", ".join(k for k, v in r["secrets"].items() if v) or "no secrets"
        typer.echo(printable(f"{r['portal']:<20} {r['name']:<16} {r['username']:<24} "
                             f"{state}  [{have}]"))


@app.command("add")
def add(portal: str, name: str,
        username: Annotated[str, typer.Option("--username", help="the portal's user name")],
        reason: Reason = None, database_url: DbUrl = None) -> None:
    """Add an account; put its password (and TOTP seed) in the secrets provider."""
    use_url(database_url)
    with queue.connect() as conn:
        accounts.add(conn, _actor(), portal, name, username, reason or "portalq accounts add")
    typer.echo(f"account {portal}/{name} added; its password goes in PORTALQ_SECRETS_DIR/"
               f"account_{portal}_{name}_password".replace("-", "_")
               + " (mode 600) or PORTALQ_ACCOUNT_..._PASSWORD")


@app.command("pause")
def pause(portal: str, name: str, reason: Reason = None, database_url: DbUrl = None) -> None:
    """No job signs in with it until resumed (its jobs wait, spending no attempt)."""
    use_url(database_url)
    with queue.connect() as conn:
        accounts.pause(conn, _actor(), portal, name, reason or "portalq accounts pause")
    typer.echo(f"account {portal}/{name} paused")


@app.command("resume")
def resume(portal: str, name: str, reason: Reason = None, database_url: DbUrl = None) -> None:
    """After its secret is fixed: jobs sign in with it again."""
    use_url(database_url)
    with queue.connect() as conn:
        accounts.resume(conn, _actor(), portal, name, reason or "portalq accounts resume")
    typer.echo(f"account {portal}/{name} resumed")


class _CheckContext:
    """The little of a flow's context that signing in needs (no job, no queue)."""

    def __init__(self, portal: str, urls: dict[str, str], folder: Any) -> None:
        self.portal, self.portal_urls, self.artifacts_dir = portal, urls, folder
        self.job_id, self.attempt = 0, 1

    def secrets(self) -> list[str]:
        return []

    async def step(self, text: str) -> None:
        return None


async def _check(portal: str, creds: Any, urls: dict[str, str]) -> Any:
    # playwright only when a browser is needed: the CLI and enqueue never load it
    from playwright.async_api import async_playwright

    # the service, console and flows load only for the command that runs them
    from portalq.portals.flows import browser
    from portalq.portals.flows.signin import sign_in

    config = browser.load_config()
    with tempfile.TemporaryDirectory(prefix="portalq-check-") as tmp:
        files.private_dir(Path(tmp))
        async with async_playwright() as pw:
            b = await browser.launch(pw, config)
            try:
                context = await b.new_context()
                context.set_default_timeout(config.action_ms)
                page = await context.new_page()
                return await sign_in(_CheckContext(portal, urls, Path(tmp)), page,  # type: ignore[arg-type]
                                     creds, portal=portal)
            finally:
                await b.close()


@app.command("check")
def check(portal: str, name: str, database_url: DbUrl = None) -> None:
    """Sign in once with the account (its secrets from the provider) and say what the
    portal answered. Nothing is filed; a refused password is reported, never retried."""
    # playwright only when a browser is needed: the CLI and enqueue never load it
    from playwright.async_api import Error as PlaywrightError

    # the service, console and flows load only for the command that runs them
    from portalq.portals.flows.context import Credentials
    from portalq.scheduler.config import Settings

    use_url(database_url)
    with queue.connect() as conn:
        found = [r for r in accounts.listing(conn, portal) if r["name"] == name]
        stored = {p["code"]: p["url"] for p in portal_rows.portals(conn)}
    if not found:
        fail(f"no account {portal}/{name}")
    password = account_secrets.get(portal, name, "password")
    if password is None:
        fail(f"account {portal}/{name} has no password in the secrets provider")
    creds = Credentials(found[0]["username"], password,
                        totp_seed=account_secrets.get(portal, name, "totp_seed"))
    urls = Settings().portal_urls(stored)
    if portal not in urls:
        fail(f"portal {portal} has no address (portals.url)")
    try:
        signed = asyncio.run(_check(portal, creds, urls))
    except AccountError as exc:
        fail(str(exc), code=ExitCode.REFUSED)
    except HandlerOutcome as exc:
        fail(f"{portal}/{name}: could not sign in: {exc}", code=ExitCode.UNAVAILABLE)
    except PlaywrightError as exc:   # the portal did not answer (refused, timed out)
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        fail(f"{portal}/{name}: could not sign in: the portal did not answer: {first}",
             code=ExitCode.UNAVAILABLE)
    days = signed.password_expires_in
    typer.echo(f"{portal}/{name}: signed in as {creds.user}"
               + (f"; the password expires in {days} days" if days is not None else ""))
