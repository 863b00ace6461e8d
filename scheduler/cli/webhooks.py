"""``portalq webhooks ...``: the app's endpoints told of its jobs' results
(:mod:`jobs.business.webhooks`).

``add`` prints the subscription's signing secret once: the receiver verifies each delivery
with it (Standard Webhooks); portalq keeps it sealed and never shows it again."""

from __future__ import annotations

from typing import Annotated

import typer

from portalq.jobs.business import webhooks
from portalq.scheduler.cli.common import DbUrl, cli_actor, print_json, use_url

app = typer.Typer(no_args_is_help=True, help="Webhooks: signed deliveries of job results.")


@app.command("add")
def add(url: str,
        events: Annotated[str, typer.Option(
            help="comma-separated: completed, failed, cancelled, waiting_for_person, "
                 "waiting_on_portal, decided")],
        as_json: Annotated[bool, typer.Option("--json")] = False,
        database_url: DbUrl = None) -> None:
    """Subscribe URL to events; prints its id and signing secret (shown this once)."""
    use_url(database_url)
    sub_id, secret = webhooks.add(url, events, by=cli_actor())
    if as_json:
        print_json({"id": sub_id, "secret": secret})
        return
    typer.echo(f"webhook {sub_id}: {url}\nsigning secret (shown once): {secret}")


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json")] = False,
          database_url: DbUrl = None) -> None:
    """Subscriptions: their events, health and waiting deliveries (never their secrets;
    credentials stored in a URL before they were refused are masked)."""
    use_url(database_url)
    rows = webhooks.subscriptions()
    if as_json:
        print_json(rows)
        return
    for r in rows:
        state = f"PAUSED: {r['pause_reason']}" if r["paused_at"] else "active"
        typer.echo(f"{r['id']:>4}  {r['url']}  [{','.join(r['events'])}]  {state}; "
                   f"{r['undelivered']} waiting, {r['failures']} failure(s) in a row")


@app.command("remove")
def remove(subscription_id: int, database_url: DbUrl = None) -> None:
    """Drop a subscription with its waiting deliveries."""
    use_url(database_url)
    webhooks.remove(subscription_id)
    typer.echo(f"webhook {subscription_id} removed")


@app.command("resume")
def resume(subscription_id: int, database_url: DbUrl = None) -> None:
    """Send at once to a subscription paused for its failures (its waiting deliveries
    first); a paused one is also probed every 4 h and active again when it answers."""
    use_url(database_url)
    webhooks.resume(subscription_id)
    typer.echo(f"webhook {subscription_id} resumed")


@app.command("log")
def log(subscription_id: int, limit: Annotated[int, typer.Option()] = 50,
        as_json: Annotated[bool, typer.Option("--json")] = False,
        database_url: DbUrl = None) -> None:
    """A subscription's deliveries, newest first: delivered or not, attempts, last error."""
    use_url(database_url)
    rows = webhooks.log(subscription_id, limit)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        state = (f"delivered {r['delivered_at']:%Y-%m-%d %H:%M:%S}Z" if r["delivered_at"]
                 else f"next try {r['next_try_at']:%Y-%m-%d %H:%M:%S}Z ({r['last_error']})")
        typer.echo(f"{r['msg_id']}  job {r['job_id']} {r['event']}: {state}, "
                   f"{r['attempts']} attempt(s)")
