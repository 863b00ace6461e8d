"""Egress per portal: a portal's browser traffic leaves through a proxy of its own (the IRS
blocks datacenter addresses; a registry may allow only a known address).

    PORTALQ_PROXY_<CODE>=http://[user@]host:port      (http, https or socks5)
    PORTALQ_PROXY_<CODE>_BYPASS=.example.org,<-loopback>   (optional: Playwright's bypass)

The password is never in the setting: it comes from the secrets provider
(:mod:`jobs.secrets.account_secrets`, account ``proxy``: the file
``<PORTALQ_SECRETS_DIR>/account_<code>_proxy_password`` or the variable
``PORTALQ_ACCOUNT_<CODE>_PROXY_PASSWORD``), fetched for each browser context and kept
only in its options. Every browser context of that portal (local or remote browser) gets
Playwright's ``proxy`` option; the start logs each portal's proxy without credentials.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from portalq.jobs.errors import InputError
from portalq.jobs.secrets import account_secrets

PREFIX = "PORTALQ_PROXY_"
SCHEMES = ("http", "https", "socks5")


@dataclass(frozen=True)
class Proxy:
    portal: str
    server: str                 # scheme://host:port, never a credential
    username: str | None = None
    bypass: str | None = None

    def shown(self) -> str:
        """For the log: where the portal's traffic goes, no credentials."""
        return (self.server + (" (with credentials)" if self.username else "")
                + (f" bypass {self.bypass}" if self.bypass else ""))

    def password(self) -> str | None:
        return account_secrets.get(self.portal, "proxy", "password")

    def options(self) -> dict[str, Any]:
        """Playwright's ``proxy`` option for a new context (the password fetched now)."""
        out: dict[str, Any] = {"server": self.server}
        if self.bypass:
            out["bypass"] = self.bypass
        if self.username:
            out["username"] = self.username
            out["password"] = self.password() or ""
        return out


def _parse(key: str, value: str, bypass: str | None) -> Proxy:
    code = key.removeprefix(PREFIX).lower()
    try:
        url = urlsplit(value.strip())
        port = url.port
    except ValueError:
        raise InputError(f"{key}: not a proxy URL (scheme://[user@]host:port)") from None
    if url.scheme not in SCHEMES or not url.hostname or url.path not in ("", "/") \
            or url.query or url.fragment:
        raise InputError(f"{key}: not a proxy URL (http, https or socks5://[user@]host:port)")
    if url.password is not None:   # never echoed: the value is not quoted
        raise InputError(f"{key}: the password does not go in the URL; put it in the secrets "
                         f"provider (account 'proxy', key 'password' of portal {code})")
    if url.username and url.scheme == "socks5":
        raise InputError(f"{key}: Chromium cannot sign in to a SOCKS5 proxy; use http(s)")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    server = f"{url.scheme}://{host}" + (f":{port}" if port else "")
    bypass = ",".join(b.strip() for b in (bypass or "").split(",") if b.strip()) or None
    return Proxy(code, server, unquote(url.username) if url.username else None, bypass)


def proxies(environ: Mapping[str, str]) -> dict[str, Proxy]:
    """Each portal's proxy from the environment; a malformed one raises (one line)."""
    out = {}
    for key, value in sorted(environ.items()):
        if key.startswith(PREFIX) and not key.endswith("_BYPASS") and value.strip():
            proxy = _parse(key, value, environ.get(f"{key}_BYPASS"))
            out[proxy.portal] = proxy
    return out


def check(found: Mapping[str, Proxy], known_portals: Iterable[str]) -> None:
    """At start: every proxy names a known portal, and one with a user name has its
    password in the secrets provider (a typo would send the traffic out directly)."""
    known = set(known_portals)
    for code, proxy in sorted(found.items()):
        if code not in known:
            raise InputError(f"{PREFIX}{code.upper()}: unknown portal {code!r} "
                             f"(known: {', '.join(sorted(known))})")
        if proxy.username and not proxy.password():
            raise InputError(f"{PREFIX}{code.upper()}: no password for the proxy user in the "
                             f"secrets provider (account 'proxy' of portal {code})")
