"""`portalq console` refuses a signing secret shorter than 32 bytes, in one line, before it
starts (issue 39): a one-character PORTALQ_CONSOLE_SECRET was accepted."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.ports import free_port


def test_a_short_console_secret_is_refused_in_one_line(db, tmp_path):
    port = str(free_port())
    for secret in ("x", "y" * 31):
        out = run_cli("console", "--port", port, env={"PORTALQ_CONSOLE_SECRET": secret},
                      timeout=30)
        assert out.returncode != 0, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "at least 32 bytes" in out.stderr and secret not in out.stderr.split(":")[-1]
    # a short key in the secret file too (written by hand)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "console-secret").write_text("short\n")
    out = run_cli("console", "--port", port, env={"PORTALQ_HOME": str(home),
                                                  "PORTALQ_CONSOLE_SECRET": ""}, timeout=30)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "at least 32 bytes" in out.stderr and "console-secret" in out.stderr
