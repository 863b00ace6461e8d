"""A run's evidence folder and the recording of what it holds (screenshots, traces,
files) and of what is missing. Evidence never decides an outcome: nothing here raises
into the job's handling."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from portalq.jobs import worker_api
from portalq.jobs.kinds import ArtifactKind
from portalq.portals.flows.browser import EVIDENCE_NOTES, MISSING_EVIDENCE, evidence_notes
from portalq.scheduler.node_db import Database, first_line

log = logging.getLogger("portalq.worker")


def run_folder(job_dir: Path, attempt: int) -> Path:
    """This run's evidence folder: ``attempt-N``, or ``attempt-N.2`` ... when attempt N ran
    before (a refunded run: a crash, a closed page, a failed probe) and left evidence."""
    folder, n = job_dir / f"attempt-{attempt}", 1
    while folder.exists():
        n += 1
        folder = job_dir / f"attempt-{attempt}.{n}"
    return folder


def evidence_in(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """An attempt folder's evidence files, and the evidence recorded as missing."""
    if not folder.is_dir():
        return [], []
    # dot-files are a tracer's partial chunks, not evidence
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                   and p.name not in (MISSING_EVIDENCE, EVIDENCE_NOTES))
    missing: list[tuple[str, str]] = []
    notes = folder / MISSING_EVIDENCE
    if notes.is_file():
        for line in notes.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                note = json.loads(line)
                missing.append((str(note["what"])[:200], str(note["reason"])[:500]))
    return files, missing


def kind_of(path: Path) -> ArtifactKind:
    return {".zip": ArtifactKind.TRACE, ".png": ArtifactKind.SCREENSHOT}.get(
        path.suffix, ArtifactKind.FILE)


async def save(db: Database, job: Mapping[str, Any], folder: Path, *,
               lease_fresh: bool, missing: Sequence[tuple[str, str]] = ()) -> None:
    """Record this attempt's evidence (and what is missing; ``missing`` adds what the run
    knows is missing beyond the folder's notes, e.g. the folder itself could not be made:
    then the files are in a scratch folder about to go, and none is recorded). Best
    effort. A node whose lease is going stale tries a few times only (it is about to
    stop anyway)."""
    try:
        files, notes = evidence_in(folder)
        if missing:
            files, notes = [], [*missing, *notes]
        if not files and not notes:
            return

        said = evidence_notes(folder)    # what a file leaves out (a trace's gaps)

        async def record(conn: Any) -> None:
            for path in files:
                await worker_api.add_artifact(conn, job_id=job["id"], attempt=job["attempts"],
                                              kind=kind_of(path), path=str(path),
                                              note=said.get(path.name))
            for what, reason in notes:
                await worker_api.add_artifact(conn, job_id=job["id"], attempt=job["attempts"],
                                              kind=ArtifactKind.MISSING, path=what, note=reason)
        await db.retrying(record, attempts=20 if lease_fresh else 3)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - logged; the job's outcome stands
        log.warning("job %s: evidence not recorded: %s", job["id"], first_line(exc))
