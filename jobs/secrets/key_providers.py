"""Where portalq's keys live: the key providers of :mod:`jobs.secrets.crypto`'s envelope encryption.

A provider holds the key-encryption keys (KEKs: one current, older ones until retired)
that wrap the data keys, and the HMAC key of keyed hashes. Providers:

* :class:`FileKeyring` (default): ``$PORTALQ_KEY_FILE`` or ``PORTALQ_HOME/keys.json``,
  created with mode 0600 by ``portalq keys init`` (never on first use: a node without the
  file would seal under a key of its own, that no other node opens); holds the KEKs (one
  current) and the HMAC key.
* :class:`EnvKeys`: ``PORTALQ_KEK="id:base64key[,id:base64key...]"`` (the first is current)
  and ``PORTALQ_HMAC_KEY=base64key``; nothing is written to disk.
* :class:`jobs.secrets.vault_transit.VaultTransit`: ``PORTALQ_KEY_PROVIDER=vault-transit`` -- data
  keys wrapped by a HashiCorp Vault (or OpenBao) Transit key; the KEK never leaves Vault.
* another KMS: any object with the :class:`KeyProvider` methods (and, for ``portalq keys
  rotate``/``retire``, ``add_current()``/``remove(key_id)``), installed with
  :func:`set_provider` (e.g. from a ``PORTALQ_PLUGINS`` module).

``PORTALQ_KEY_PROVIDER`` (``file``, ``env``, ``vault-transit``) chooses; unset, it is
``env`` when ``PORTALQ_KEK`` is set, else ``file``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets as _random
import stat
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from portalq.jobs import files
from portalq.jobs.errors import InputError, KeyError_
from portalq.jobs.secrets import aead as aead_lib
from portalq.jobs.secrets import key_record

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE = 12




@runtime_checkable
class KeyProvider(Protocol):
    """Where portalq's keys live. ``current_id`` names the KEK new data keys are wrapped
    with; ``unwrap`` must accept every id still named by a stored row."""

    def current_id(self) -> str: ...

    def wrap(self, dek: bytes) -> tuple[str, bytes]:
        """``dek`` wrapped by the current KEK: (its id, the wrapped bytes)."""
        ...

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes: ...

    def hmac_key(self) -> bytes:
        """The secret key of keyed hashes (rate keys). Never rotated with the KEKs: a
        rate key must stay the same for the same person."""
        ...

    def key_ids(self) -> list[str]: ...


def _aes_wrap(kek: bytes, key_id: str, dek: bytes) -> bytes:
    nonce = os.urandom(NONCE)
    return nonce + aead_lib.aesgcm()(kek).encrypt(nonce, dek, key_id.encode())


def _aes_unwrap(kek: bytes, key_id: str, wrapped: bytes) -> bytes:
    try:
        cipher = aead_lib.aesgcm()(kek)
        return cipher.decrypt(wrapped[:NONCE], wrapped[NONCE:], key_id.encode())
    except aead_lib.invalid_tag():
        raise KeyError_(f"key {key_id!r} does not open this data key (tampered?)") from None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise KeyError_(f"{what} is not base64") from None
    if len(raw) != 32:
        raise KeyError_(f"{what} must be 32 bytes (base64 of 32 random bytes)")
    return raw


class EnvKeys:
    """KEKs and the HMAC key from environment variables (nothing on disk)."""

    def __init__(self, kek_spec: str, hmac_b64: str | None) -> None:
        self._keks: dict[str, bytes] = {}
        self._current = ""
        for i, item in enumerate(p.strip() for p in kek_spec.split(",") if p.strip()):
            key_id, sep, b64 = item.partition(":")
            if not sep or not key_id:
                raise KeyError_("PORTALQ_KEK must be id:base64key[,id:base64key...]")
            self._keks[key_id] = unb64(b64, f"PORTALQ_KEK key {key_id!r}")
            if i == 0:
                self._current = key_id
        if not self._current:
            raise KeyError_("PORTALQ_KEK names no key")
        if hmac_b64:
            self._hmac = unb64(hmac_b64, "PORTALQ_HMAC_KEY")
        else:  # derived from the first-listed KEK, so it must then be listed forever
            self._hmac = hmac.new(self._keks[self._current], b"portalq rate keys",
                                  hashlib.sha256).digest()

    def current_id(self) -> str:
        return self._current

    def wrap(self, dek: bytes) -> tuple[str, bytes]:
        return self._current, _aes_wrap(self._keks[self._current], self._current, dek)

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        kek = self._keks.get(key_id)
        if kek is None:
            raise KeyError_(f"key {key_id!r} is not in PORTALQ_KEK")
        return _aes_unwrap(kek, key_id, wrapped)

    def hmac_key(self) -> bytes:
        return self._hmac

    def key_ids(self) -> list[str]:
        return list(self._keks)


def _check_key_file(path: Path, st: os.stat_result) -> None:
    """A keyring is a regular file only its owner can read (one line, never a traceback:
    /dev/null, a folder, a file others may read)."""
    if not stat.S_ISREG(st.st_mode):
        raise KeyError_(f"{path} is not a portalq keyring (not a regular file)")
    try:
        files.check_secret_file(path, st, "key file")
    except InputError as exc:
        raise KeyError_(str(exc)) from None


class FileKeyring:
    """A JSON keyring file, mode 0600: ``{"current": id, "keks": {id: b64}, "hmac": b64}``.

    Made only when asked (:meth:`init`, ``portalq keys init``; ``create=True``: on first
    use, for a process that owns its keyring -- the demo, a test). Re-read when it changes
    on disk (``portalq keys rotate`` in another process), so a running service starts
    wrapping with a new KEK within moments.
    """

    #: how stale a reader's view may be (a writer -- wrap -- always checks the file)
    RECHECK_SECONDS = 1.0

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path, self.create = path, create
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._data: dict[str, object] = {}
        self._checked = 0.0
        self._aead: dict[str, AESGCM] = {}
        self._hmac: bytes | None = None

    def _load(self, *, fresh: bool = True) -> dict[str, object]:
        if not fresh and self._stamp is not None and (
                time.monotonic() - self._checked < self.RECHECK_SECONDS):
            return self._data
        self._checked = time.monotonic()
        try:
            st = self.path.stat()
        except FileNotFoundError:
            if not self.create:
                raise KeyError_(f"no keyring at {self.path}: copy the other nodes' key file "
                                "there, or make a new one with `portalq keys init`") from None
            with self._lock:
                self._create()
            st = self.path.stat()
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            _check_key_file(self.path, st)
            with self._lock:
                try:
                    data = json.loads(self.path.read_bytes())
                except (OSError, ValueError):   # ValueError: not JSON, not UTF-8
                    data = None
                if not isinstance(data, dict) or "keks" not in data:
                    raise KeyError_(f"{self.path} is not a portalq keyring")
                self._data, self._stamp = data, stamp
                self._aead, self._hmac = {}, None
        return self._data

    def _kek(self, key_id: str, data: dict[str, object]) -> AESGCM:
        aead = self._aead.get(key_id)
        if aead is None:
            b64 = data["keks"].get(key_id)  # type: ignore[attr-defined]
            if b64 is None:
                raise KeyError_(f"key {key_id!r} is not in {self.path} (removed?)")
            aead = self._aead[key_id] = aead_lib.aesgcm()(unb64(b64, key_id))
        return aead

    def init(self) -> bool:
        """Make the keyring if there is none (``portalq keys init``); False: one exists
        (it is checked, never replaced: its keys open what is stored)."""
        with self._lock:
            made = not self.path.exists()
            if made:
                try:
                    self._create()
                except FileExistsError:   # made by another process meanwhile: that one
                    made = False
        self._load()
        return made

    def _create(self) -> None:
        if self.path.exists():
            return
        key_id = f"k{_random.token_hex(4)}"
        new = b64(aead_lib.aesgcm().generate_key(256))
        self._write({"current": key_id, "keks": {key_id: new},
                     "hmac": b64(os.urandom(32))}, exclusive=True)
        key_record.begin(self.path)   # the databases using it: none yet (issue 35)

    def _write(self, data: dict[str, object], *, exclusive: bool = False) -> None:
        files.private_dir(self.path.parent)
        files.write_private(self.path, json.dumps(data, indent=1).encode(),
                            exclusive=exclusive)
        self._stamp = None

    def _keks(self) -> dict[str, str]:
        return self._load()["keks"]  # type: ignore[return-value]

    def current_id(self) -> str:
        return str(self._load(fresh=False)["current"])

    def wrap(self, dek: bytes) -> tuple[str, bytes]:
        data = self._load()   # always current: a rotation elsewhere takes effect at once
        key_id = str(data["current"])
        nonce = os.urandom(NONCE)
        return key_id, nonce + self._kek(key_id, data).encrypt(nonce, dek, key_id.encode())

    def wrap_many(self, deks: Sequence[bytes]) -> list[tuple[str, bytes]]:
        """:meth:`wrap` of each data key (a batch, a key per value): one look at the file,
        one read of the random source."""
        data = self._load()
        key_id = str(data["current"])
        aead, aad = self._kek(key_id, data), key_id.encode()
        raw = os.urandom(NONCE * len(deks))
        nonces = [raw[i:i + NONCE] for i in range(0, len(raw), NONCE)]
        wrapped = map(bytes.__add__, nonces,
                      map(aead.encrypt, nonces, deks, [aad] * len(deks)))
        return [(key_id, w) for w in wrapped]

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        data = self._load(fresh=False)
        if key_id not in data["keks"]:  # type: ignore[operator]
            data = self._load()   # a key added by a rotation since
        try:
            return self._kek(key_id, data).decrypt(wrapped[:NONCE], wrapped[NONCE:],
                                                   key_id.encode())
        except aead_lib.invalid_tag():
            raise KeyError_(f"key {key_id!r} does not open this data key (tampered?)") from None

    def hmac_key(self) -> bytes:
        data = self._load(fresh=False)
        if self._hmac is None:
            self._hmac = unb64(str(data["hmac"]), "hmac key")
        return self._hmac

    def key_ids(self) -> list[str]:
        return list(self._keks())

    # -- rotation (portalq keys ...) ---------------------------------------------------------
    def add_current(self) -> str:
        """A new KEK, made current; the old ones stay until retired."""
        data = dict(self._load())
        key_id = f"k{_random.token_hex(4)}"
        data["keks"] = {**self._keks(), key_id: b64(aead_lib.aesgcm().generate_key(256))}
        data["current"] = key_id
        self._write(data)
        return key_id

    def remove(self, key_id: str) -> None:
        data = dict(self._load())
        if key_id == data["current"]:
            raise KeyError_(f"key {key_id!r} is the current key")
        keks = dict(self._keks())
        if keks.pop(key_id, None) is None:
            raise KeyError_(f"no key {key_id!r} in {self.path}")
        data["keks"] = keks
        self._write(data)
