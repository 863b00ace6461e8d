"""``portalq enqueue file_entity ... --document signed.pdf`` (issue 38): the business's own
signed certificate stored sealed with the job, in the job's transaction; bad input is a
one-line error, a non-zero exit and nothing written."""

from __future__ import annotations

import json

import pytest

from portalq.jobs.secrets import crypto
from tests import payloads
from tests.conftest import run_cli

PDF = b"%PDF-1.4\n% the business's signed certificate\n%%EOF\n"


def _enqueue(tmp_path, *extra: str, payload: dict | None = None):
    return run_cli("enqueue", "file_entity", "--order", "ORD-DOC", "--payload",
                   json.dumps(payload or payloads.FILE_ENTITY_DE), *extra)


def test_a_supplied_pdf_is_stored_sealed_with_the_job(db, conn, tmp_path):
    path = tmp_path / "Signed Certificate.pdf"
    path.write_bytes(PDF)
    out = _enqueue(tmp_path, "--document", str(path))
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout.strip())
    [(name, content_type, data, key_id)] = conn.execute(
        "SELECT name, content_type, data, key_id FROM portalq.job_documents WHERE job_id = %s",
        (job_id,)).fetchall()
    assert (name, content_type) == ("supplied_Signed_Certificate.pdf", "application/pdf")
    assert key_id and PDF not in bytes(data)                   # sealed at rest
    assert crypto.open_blob(key_id, bytes(data)) == PDF


@pytest.mark.parametrize("case", ["not a pdf", "missing", "wrong job"])
def test_bad_document_is_a_one_line_error_and_nothing_is_written(db, conn, tmp_path, case):
    path = tmp_path / "doc.pdf"
    if case != "missing":
        path.write_bytes(b"<html>not a pdf</html>" if case == "not a pdf" else PDF)
    payload = payloads.FILE_ENTITY_BC if case == "wrong job" else None
    out = _enqueue(tmp_path, "--document", str(path), payload=payload)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert {"not a pdf": "not a PDF", "missing": "no such file",
            "wrong job": "takes no document"}[case] in out.stderr
    assert conn.execute("SELECT count(*) FROM portalq.job_queue").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM portalq.job_documents").fetchone()[0] == 0
