"""Egress per portal (issue 37): the proxy settings as read and refused, never a password."""

from __future__ import annotations

import pytest

from portalq.jobs.errors import InputError
from portalq.scheduler.egress import Proxy, check, proxies


def test_a_proxy_per_portal_with_its_bypass_and_user(monkeypatch, tmp_path):
    found = proxies({"PORTALQ_PROXY_IRS_EIN": "http://ops@10.0.0.5:3128",
                     "PORTALQ_PROXY_IRS_EIN_BYPASS": " .irs.gov , <-loopback> ",
                     "PORTALQ_PROXY_CRTC": "socks5://proxy.example:1080",
                     "PORTALQ_PROXY_DELAWARE_ICIS": " ", "PORTALQ_OTHER": "x"})
    assert found == {"irs_ein": Proxy("irs_ein", "http://10.0.0.5:3128", "ops",
                                      ".irs.gov,<-loopback>"),
                     "crtc": Proxy("crtc", "socks5://proxy.example:1080")}
    secret = tmp_path / "account_irs_ein_proxy_password"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    monkeypatch.setenv("PORTALQ_SECRETS_DIR", str(tmp_path))
    assert found["irs_ein"].options() == {"server": "http://10.0.0.5:3128", "username": "ops",
                                          "password": "s3cret",
                                          "bypass": ".irs.gov,<-loopback>"}
    assert "s3cret" not in found["irs_ein"].shown() and "ops" not in found["irs_ein"].shown()
    check(found, ["irs_ein", "crtc"])


@pytest.mark.parametrize("value, says", [
    ("http://ops:hunter2@proxy:3128", "the password does not go in the URL"),
    ("ftp://proxy:21", "not a proxy URL"),
    ("http://proxy:3128/path", "not a proxy URL"),
    ("http://proxy:99999", "not a proxy URL"),
    ("socks5://ops@proxy:1080", "cannot sign in to a SOCKS5 proxy"),
])
def test_a_malformed_proxy_is_refused_in_one_line_without_its_value(value, says):
    with pytest.raises(InputError) as info:
        proxies({"PORTALQ_PROXY_IRS_EIN": value})
    assert says in str(info.value) and "\n" not in str(info.value)
    assert "hunter2" not in str(info.value)


def test_an_unknown_portal_or_a_missing_password_stops_the_start(monkeypatch, tmp_path):
    monkeypatch.setenv("PORTALQ_SECRETS_DIR", str(tmp_path))
    monkeypatch.delenv("PORTALQ_ACCOUNT_IRS_EIN_PROXY_PASSWORD", raising=False)
    with pytest.raises(InputError, match="unknown portal 'irs'"):
        check(proxies({"PORTALQ_PROXY_IRS": "http://proxy:3128"}), ["irs_ein"])
    with pytest.raises(InputError, match="no password for the proxy user"):
        check(proxies({"PORTALQ_PROXY_IRS_EIN": "http://ops@proxy:3128"}), ["irs_ein"])
