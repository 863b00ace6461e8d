"""A key provider on HashiCorp Vault's Transit secrets engine (or OpenBao's, the same API):
the key-encryption key never leaves Vault; portalq's data keys are wrapped and unwrapped by
``POST /v1/<mount>/encrypt/<key>`` and ``/decrypt/<key>``.

Selected with ``PORTALQ_KEY_PROVIDER=vault-transit`` (jobs/secrets/crypto.py ``provider()``):

* ``VAULT_ADDR`` (e.g. ``https://vault.internal:8200``), ``VAULT_CACERT`` (optional),
  ``VAULT_NAMESPACE`` (optional, Vault Enterprise / HCP);
* the token: ``PORTALQ_VAULT_TOKEN_FILE`` or ``VAULT_TOKEN_FILE`` (re-read when it changes,
  as a Vault Agent sink rewrites it), else ``VAULT_TOKEN``;
* ``PORTALQ_VAULT_TRANSIT_KEY`` (default ``portalq``) and ``PORTALQ_VAULT_TRANSIT_MOUNT``
  (default ``transit``).

A stored value names its KEK as ``vault:<key>:v<version>`` -- Vault's key version, which
Vault also writes into the wrapped key (``vault:v2:...``). ``portalq keys rotate`` rotates
the Transit key (``/keys/<key>/rotate``) and re-wraps every data key under the new version;
``portalq keys retire vault:<key>:vN`` raises the key's ``min_decryption_version`` past N
once nothing needs it. The rate-key HMAC key (which must never change: a rate key must stay
the same for the same person) is Vault's HMAC of a fixed label under version 1 of a second
Transit key, ``PORTALQ_VAULT_HMAC_KEY`` (default ``<key>-hmac``), that portalq never
rotates; fetched once per process. Or ``PORTALQ_HMAC_KEY`` when set.

The token needs: ``update`` on ``<mount>/encrypt/<key>``, ``<mount>/decrypt/<key>``,
``<mount>/hmac/<key>-hmac/*``; ``read`` on ``<mount>/keys/<key>``; for ``keys rotate`` / ``retire``
also ``update`` on ``<mount>/keys/<key>/rotate`` and ``<mount>/keys/<key>/config``.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from portalq.jobs import files, settings
from portalq.jobs.errors import InputError, KeyError_
from portalq.jobs.secrets.key_providers import unb64

#: how long the key's latest version is trusted before it is read again (seconds)
RECHECK_SECONDS = 5.0
TIMEOUT_SECONDS = 10.0
_HMAC_LABEL = base64.b64encode(b"portalq rate keys").decode()


def _vault_variables() -> dict[str, str]:
    """Vault's own variables, as its CLI reads them (not portalq settings)."""
    values = {"VAULT_ADDR": os.environ.get("VAULT_ADDR"),
              "VAULT_TOKEN": os.environ.get("VAULT_TOKEN"),
              "VAULT_TOKEN_FILE": os.environ.get("VAULT_TOKEN_FILE"),
              "VAULT_NAMESPACE": os.environ.get("VAULT_NAMESPACE"),
              "VAULT_CACERT": os.environ.get("VAULT_CACERT")}
    return {name: value for name, value in values.items() if value}


def _portalq_variables() -> dict[str, str]:
    """The PORTALQ_* Vault settings under their variable names (what from_env reads)."""
    keys = settings.current(settings.KeySettings)
    values = {"PORTALQ_VAULT_TOKEN_FILE": keys.vault_token_file,
              "PORTALQ_VAULT_TRANSIT_KEY": keys.vault_transit_key,
              "PORTALQ_VAULT_TRANSIT_MOUNT": keys.vault_transit_mount,
              "PORTALQ_VAULT_HMAC_KEY": keys.vault_hmac_key,
              "PORTALQ_HMAC_KEY": keys.hmac_key.get_secret_value() if keys.hmac_key else None}
    return {name: str(value) for name, value in values.items() if value}


class VaultTransit:
    """:class:`jobs.secrets.crypto.KeyProvider` on a Vault Transit key."""

    def __init__(self, addr: str, *, key: str = "portalq", mount: str = "transit",
                 hmac_transit_key: str | None = None, token: str | None = None,
                 token_file: Path | None = None,
                 namespace: str | None = None, cacert: str | None = None,
                 hmac_key: bytes | None = None) -> None:
        url = urllib.parse.urlsplit(addr)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise KeyError_("VAULT_ADDR must be an http(s) address, e.g. https://vault:8200")
        if not token and token_file is None:
            raise KeyError_("no Vault token: set VAULT_TOKEN or PORTALQ_VAULT_TOKEN_FILE")
        self.addr = addr.rstrip("/")
        self.key, self.mount = key, mount.strip("/")
        self.hmac_transit_key = hmac_transit_key or f"{key}-hmac"
        self._token, self._token_file = token, token_file
        self._token_stamp: tuple[int, int] | None = None
        self._namespace = namespace
        self._ssl = ssl.create_default_context(cafile=cacert) if cacert else None
        self._hmac = hmac_key
        self._lock = threading.Lock()
        self._latest: int | None = None
        self._min_decrypt = 1
        self._checked = 0.0

    @classmethod
    def from_env(cls, env: Any = None) -> VaultTransit:
        """From Vault's own variables (``VAULT_ADDR``...) and the Vault settings
        (jobs.settings.KeySettings); ``env``: one mapping of both names instead."""
        if env is None:
            env = {**_vault_variables(), **_portalq_variables()}
        addr = env.get("VAULT_ADDR")
        if not addr:
            raise KeyError_("PORTALQ_KEY_PROVIDER=vault-transit needs VAULT_ADDR")
        token_file = env.get("PORTALQ_VAULT_TOKEN_FILE") or env.get("VAULT_TOKEN_FILE")
        hmac_b64 = env.get("PORTALQ_HMAC_KEY")
        hmac_key = None
        if hmac_b64:
            hmac_key = unb64(hmac_b64, "PORTALQ_HMAC_KEY")
        return cls(addr, key=env.get("PORTALQ_VAULT_TRANSIT_KEY", "portalq"),
                   mount=env.get("PORTALQ_VAULT_TRANSIT_MOUNT", "transit"),
                   hmac_transit_key=env.get("PORTALQ_VAULT_HMAC_KEY"),
                   token=env.get("VAULT_TOKEN"),
                   token_file=Path(token_file).expanduser() if token_file else None,
                   namespace=env.get("VAULT_NAMESPACE"), cacert=env.get("VAULT_CACERT"),
                   hmac_key=hmac_key)

    def __repr__(self) -> str:   # never the token
        return f"VaultTransit({self.addr}, {self.mount}/{self.key})"

    # -- HTTP ---------------------------------------------------------------------------
    def _token_now(self) -> str:
        if self._token_file is None:
            assert self._token is not None
            return self._token
        try:
            st = self._token_file.stat()
            stamp = (st.st_mtime_ns, st.st_ino)
            if stamp != self._token_stamp:
                files.check_secret_file(self._token_file, st, "Vault token file")
                self._token = self._token_file.read_text().strip()
                self._token_stamp = stamp
        except InputError as exc:   # others may read or change it
            raise KeyError_(str(exc)) from None
        except UnicodeDecodeError:
            raise KeyError_(f"Vault token file {self._token_file} is not UTF-8 text") from None
        except OSError as exc:
            raise KeyError_(f"Vault token file {self._token_file}: {exc.strerror}") from None
        if not self._token:
            raise KeyError_(f"Vault token file {self._token_file} is empty")
        return self._token

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
        url = f"{self.addr}/v1/{self.mount}/{path}"
        headers = {"X-Vault-Token": self._token_now(), "Content-Type": "application/json"}
        if self._namespace:
            headers["X-Vault-Namespace"] = self._namespace
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        what = f"Vault {method} {self.mount}/{'/'.join(path.split('/')[:2])}"
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS,
                                        context=self._ssl) as response:
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
                return answer
        except urllib.error.HTTPError as exc:
            # Vault's own errors ("permission denied", "invalid ciphertext") -- they
            # quote neither the token nor a plaintext
            try:
                errors = "; ".join(json.loads(exc.read()).get("errors") or [])
            except ValueError:
                errors = ""
            raise KeyError_(f"{what}: HTTP {exc.code}" + (f" ({errors[:200]})" if errors
                                                          else "")) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KeyError_(f"{what}: {type(reason).__name__}: {reason}"[:300]) from None

    # -- the key's versions ---------------------------------------------------------------
    def _id(self, version: int) -> str:
        return f"vault:{self.key}:v{version}"

    def _version(self, key_id: str) -> int:
        prefix = f"vault:{self.key}:v"
        if not key_id.startswith(prefix) or not key_id[len(prefix):].isdigit():
            raise KeyError_(f"key {key_id!r} is not a version of Vault key {self.key!r}")
        return int(key_id[len(prefix):])

    def _read_key(self, *, fresh: bool = False) -> int:
        with self._lock:
            if (fresh or self._latest is None
                    or time.monotonic() - self._checked > RECHECK_SECONDS):
                data = self._call("GET", f"keys/{self.key}")["data"]
                self._latest = int(data["latest_version"])
                self._min_decrypt = int(data.get("min_decryption_version") or 1)
                self._checked = time.monotonic()
            return self._latest

    def current_id(self) -> str:
        return self._id(self._read_key())

    def key_ids(self) -> list[str]:
        latest = self._read_key(fresh=True)
        return [self._id(v) for v in range(self._min_decrypt, latest + 1)]

    # -- KeyProvider -----------------------------------------------------------------------
    def wrap(self, dek: bytes) -> tuple[str, bytes]:
        data = self._call("POST", f"encrypt/{self.key}",
                          {"plaintext": base64.b64encode(dek).decode()})["data"]
        return self._wrapped(data)

    def wrap_many(self, deks: Sequence[bytes]) -> list[tuple[str, bytes]]:
        """:meth:`wrap` of each data key in one request (Transit's ``batch_input``): a batch
        enqueue seals each job with a key of its own, not one request per job."""
        if len(deks) == 1:
            return [self.wrap(deks[0])]
        data = self._call("POST", f"encrypt/{self.key}", {"batch_input": [
            {"plaintext": base64.b64encode(d).decode()} for d in deks]})["data"]
        results = data.get("batch_results") or []
        failed = [r["error"] for r in results if r.get("error")]
        if failed or len(results) != len(deks):
            raise KeyError_(f"Vault wrapped {len(results) - len(failed)} data keys of "
                            f"{len(deks)}" + (f": {failed[0]}" if failed else ""))
        return [self._wrapped(r) for r in results]

    def _wrapped(self, data: dict[str, Any]) -> tuple[str, bytes]:
        ciphertext = str(data["ciphertext"])          # "vault:v<N>:..."
        version = int(data.get("key_version") or ciphertext.split(":")[1][1:])
        with self._lock:
            if self._latest is None or version > self._latest:
                self._latest = version   # a rotation seen through the answer
        return self._id(version), ciphertext.encode()

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        version = self._version(key_id)
        ciphertext = bytes(wrapped).decode()
        if not ciphertext.startswith(f"vault:v{version}:"):
            raise KeyError_(f"the wrapped key does not name version {version} of "
                            f"{self.key!r} (tampered?)")
        data = self._call("POST", f"decrypt/{self.key}", {"ciphertext": ciphertext})["data"]
        return base64.b64decode(data["plaintext"])

    def hmac_key(self) -> bytes:
        if self._hmac is None:
            data = self._call("POST", f"hmac/{self.hmac_transit_key}/sha2-256",
                              {"input": _HMAC_LABEL, "key_version": 1})["data"]
            self._hmac = base64.b64decode(str(data["hmac"]).split(":", 2)[2])
        return self._hmac

    # -- rotation (portalq keys rotate / retire) -------------------------------------------
    def add_current(self) -> str:
        """A new version of the Transit key, made current (Vault keeps the older ones)."""
        self._call("POST", f"keys/{self.key}/rotate")
        return self._id(self._read_key(fresh=True))

    def remove(self, key_id: str) -> None:
        """Version ``key_id`` and every older one no longer decrypt (the key's
        ``min_decryption_version``); Vault's ``trim`` can then delete them for good."""
        version = self._version(key_id)
        if version >= self._read_key(fresh=True):
            raise KeyError_(f"key {key_id!r} is the current key")
        if version >= self._min_decrypt:
            self._call("POST", f"keys/{self.key}/config",
                       {"min_decryption_version": version + 1})
        self._read_key(fresh=True)
