"""Issue 48 item 16: a secret file of ``PORTALQ_SECRETS_DIR`` that others may read was
refused by ``portalq run`` only; the CLI, the console and an enqueuing application used it
silently. Refused as key files are: by every process, in one line, nothing written."""

from __future__ import annotations

from pathlib import Path

from tests.acceptance.test_bad_input_issue35 import ein, jobs_in, one_line
from tests.conftest import run_cli


def test_a_secret_file_others_may_read_is_refused_by_every_command(db, dsn, tmp_path: Path):
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    secret = folder / "portalq_smtp_url"
    secret.write_text("smtp://user:pass@127.0.0.1:25")
    secret.chmod(0o644)
    env = {"PORTALQ_SECRETS_DIR": str(folder)}
    for out in (ein(env), run_cli("jobs", "list", env=env), run_cli("portals", "list", env=env),
                run_cli("keys", "status", env=env)):
        one_line(out, "portalq_smtp_url", "readable by others", "chmod 600")
    assert jobs_in(dsn) == 0
    secret.chmod(0o600)
    assert ein(env).returncode == 0 and jobs_in(dsn) == 1
