"""Documents a business supplies with a job (``portalq enqueue ... --document file.pdf``):
e.g. its own signed certificate of formation, which the Delaware flow uploads instead of
building one from the payload.

Stored like the documents flows produce (``job_documents``, sealed with its own data key),
under the name ``supplied_<file name>``, in the same transaction as the job: a worker can
never claim the job before its document is there. Outputs are the other names; ``deliver``
mails outputs only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from portalq.jobs import clock
from portalq.jobs.db import sql
from portalq.jobs.errors import InputError
from portalq.jobs.secrets import crypto

PREFIX = "supplied_"
MAX_BYTES = 10 * 1024 * 1024
#: the job types (and jurisdictions) whose flow reads a supplied document
ACCEPTS = {"file_entity": ("DE",)}


def is_supplied(name: str) -> bool:
    return name.startswith(PREFIX)


def read_pdf(path: Path) -> tuple[str, bytes]:
    """(stored name, bytes) of the PDF at ``path``; InputError if it is not one."""
    if not path.is_file():
        raise InputError(f"--document {path}: no such file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise InputError(f"--document {path.name}: {size} bytes, more than {MAX_BYTES}")
    data = path.read_bytes()
    if not data.startswith(b"%PDF-"):
        raise InputError(f"--document {path.name}: not a PDF (no %PDF- header)")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", path.name)[-100:]
    return f"{PREFIX}{safe}", data


def check_accepted(job_type: str, payload: dict[str, Any] | None) -> None:
    """InputError unless ``job_type`` (with this payload's jurisdiction) reads a document."""
    wanted = ACCEPTS.get(job_type)
    jurisdiction = (payload or {}).get("jurisdiction")
    if wanted is None or jurisdiction not in wanted:
        raise InputError(f"--document: a {job_type} job "
                         f"{f'for {jurisdiction} ' if jurisdiction else ''}takes no document "
                         "(only file_entity for DE: the signed certificate)")


def attach(conn: Any, job_id: int, name: str, data: bytes) -> None:
    """Store ``data`` sealed as the job's supplied document ``name`` (caller's transaction)."""
    key_id, blob = crypto.seal_blob(data)
    sql.fetch(conn, "store_document", {"job_id": job_id, "name": name,
                                       "content_type": "application/pdf", "data": blob,
                                       "key_id": key_id, "now": clock.now()})
