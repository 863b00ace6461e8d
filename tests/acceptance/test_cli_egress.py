"""`portalq run` refuses a malformed proxy setting at start: one line, non-zero exit, the
password never echoed (issue 37, egress per portal)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_run_refuses_a_proxy_with_its_password_in_the_url(tmp_path):
    out = run_cli("run", env={"PORTALQ_PROXY_IRS_EIN": "http://ops:hunter2@proxy:3128",
                              "PORTALQ_HOME": str(tmp_path),
                              "PORTALQ_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines == ["portalq: error: PORTALQ_PROXY_IRS_EIN: the password does not go in the URL; put "
                     "it in the secrets provider (account 'proxy', key 'password' of portal "
                     "irs_ein)"], lines
    assert "hunter2" not in out.stderr + out.stdout
    assert not any(tmp_path.iterdir())   # nothing written
