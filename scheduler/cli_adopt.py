"""``portalq adopt``: take over the business's old queue (jobs/business/adopt.py).

    portalq adopt                       dry run: what each row of public.job_queue becomes
    portalq adopt --apply               import it (again: nothing imported twice)
    portalq adopt --table app.jobs --map-type file_llc=file_entity --apply
"""

from __future__ import annotations

from typing import Annotated

import typer

from portalq.jobs import queue
from portalq.jobs.business import adopt as a
from portalq.scheduler.cli_common import DbUrl, fail, use_url


def adopt(
    table: Annotated[str, typer.Option(help="the legacy queue, schema.name")] = "public.job_queue",
    apply: Annotated[bool, typer.Option("--apply", help="import (default: a dry run that "
                                        "writes nothing)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print what each row would "
                                          "become, write nothing (the default)")] = False,
    map_type: Annotated[list[str] | None, typer.Option(
        "--map-type", help="OLD=NEW: the legacy job type OLD is portalq's NEW (repeatable)")
    ] = None,
    database_url: DbUrl = None,
) -> None:
    """Take over a legacy job queue: pending and deferred rows become jobs, running rows
    jobs waiting for a person (they may have been filed), failed rows failed jobs; finished
    rows are counted, others skipped with the reason. The legacy table is only read.
    Stop the old dispatcher first."""
    if apply and dry_run:
        fail("give --apply or --dry-run, not both")
    types: dict[str, str] = {}
    for item in map_type or ():
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            fail(f"--map-type {item!r}: give OLD=NEW")
        types[old.strip()] = new.strip()
    where = a.parse_table(table)
    use_url(database_url)
    with queue.connect() as conn:
        rows = a.read(conn, where)
        plans = a.plan(rows, where, conn, types)
        if apply:
            a.apply(plans, where, conn)   # committed as the connection closes
    for p in plans:
        typer.echo(a.line(p, apply))
    typer.echo(a.summary(plans, apply))


def register(app: typer.Typer) -> None:
    app.command("adopt")(adopt)
