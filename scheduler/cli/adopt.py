"""``portalq adopt``: take over the business's old queue (jobs/business/adopt.py).

    portalq adopt                       dry run: what each row of public.job_queue becomes
    portalq adopt --apply               import it (again: nothing imported twice)
    portalq adopt --table app.jobs --map-type file_llc=file_entity --apply
    portalq adopt --blank-secrets       once the import is verified: empty the old table's
                                        plaintext secret fields of the rows imported
"""

from __future__ import annotations

import tempfile
from typing import Annotated

import typer

from portalq.jobs import queue
from portalq.jobs.business import adopt as a
from portalq.scheduler.cli.common import DbUrl, fail, use_url


def adopt(
    table: Annotated[str, typer.Option(help="the legacy queue, schema.name")] = "public.job_queue",
    apply: Annotated[bool, typer.Option("--apply", help="import (default: a dry run that "
                                        "writes nothing)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print what each row would "
                                          "become, write nothing (the default)")] = False,
    map_type: Annotated[list[str] | None, typer.Option(
        "--map-type", help="OLD=NEW: the legacy job type OLD is portalq's NEW (repeatable)")
    ] = None,
    blank_secrets: Annotated[bool, typer.Option(
        "--blank-secrets", help="once the import is verified: empty the secret fields "
        "(SSNs, ITINs) the old table holds in plaintext, in the rows imported into portalq "
        "only (the one write into the old table)")] = False,
    database_url: DbUrl = None,
) -> None:
    """Take over a legacy job queue: pending and deferred rows become jobs, running rows
    jobs waiting for a person (they may have been filed), failed rows failed jobs; finished
    rows are counted, others skipped with the reason. The legacy table is only read (but
    for --blank-secrets). Stop the old dispatcher first."""
    if apply and dry_run:
        fail("give --apply or --dry-run, not both")
    if blank_secrets and (apply or dry_run):
        fail("give --blank-secrets on its own, once the import is verified (not both with "
             "--apply or --dry-run)")
    types: dict[str, str] = {}
    for item in map_type or ():
        old, sep, new = item.partition("=")
        if not sep or not old.strip() or not new.strip():
            fail(f"--map-type {item!r}: give OLD=NEW")
        types[old.strip()] = new.strip()
    where = a.parse_table(table)
    use_url(database_url)
    tally = a.Tally()
    # the rows' lines wait in a file, not in memory, and are shown once the import stands
    with tempfile.TemporaryFile("w+", encoding="utf-8") as lines:
        with queue.connect() as conn, queue.connect() as legacy:
            for rows in a.stream(legacy, where):
                plans = a.plan(rows, where, conn, types)
                if apply:
                    a.apply(plans, where, conn)
                elif blank_secrets:
                    a.blank(plans, where, conn)
                for p in plans:
                    lines.write(a.line(p, apply) + "\n")
                    tally.add(p)
        # committed as the connections closed
        lines.seek(0)
        for text in lines:
            typer.echo(text, nl=False)
    mode = "apply" if apply else "blank" if blank_secrets else "dry"
    for text in a.summary(tally, mode, where):
        typer.echo(text)


def register(app: typer.Typer) -> None:
    app.command("adopt")(adopt)
