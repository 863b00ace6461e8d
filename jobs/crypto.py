"""Envelope encryption for secrets at rest: AES-256-GCM data keys wrapped by a key-encryption
key (KEK) that never enters the database.

Every sealed value has its own random data key (DEK); the DEK is stored wrapped by the
current KEK next to the ciphertext, with the KEK's id. Rotating the KEK re-wraps DEKs (a
few bytes per row), never the data; once no row names the old KEK it can be deleted, and
every copy of the database made before (dumps, WAL, backups) is then unreadable.

Key providers (:class:`KeyProvider`):

* :class:`FileKeyring` (default): ``$PORTALQ_KEY_FILE`` or ``PORTALQ_HOME/keys.json``,
  created with mode 0600 on first use; holds the KEKs (one current) and the HMAC key.
* :class:`EnvKeys`: ``PORTALQ_KEK="id:base64key[,id:base64key...]"`` (the first is current)
  and ``PORTALQ_HMAC_KEY=base64key``; nothing is written to disk.
* :class:`jobs.vault_transit.VaultTransit`: ``PORTALQ_KEY_PROVIDER=vault-transit`` -- data
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
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from jobs import files
from jobs.errors import PortalqError

NONCE = 12
_DATA_AAD = b"portalq-sealed-v1"
#: the stored form of a value bound to its place (format 2): magic + nonce + ciphertext,
#: sealed with associated data naming the place (:func:`place`); format 1 (no magic, one
#: fixed associated data) is what older rows hold, and still opens
V2 = b"PQS2"


class KeyError_(PortalqError):
    """A key is missing or does not open a value (wrong key, tampered data)."""


class NotItsPlace(KeyError_):
    """The data key opened but the value did not: it was altered, or sealed for another
    place (another job's row, another field) and copied here."""


def place(job_id: int, job_type: str, field: str) -> bytes:
    """The associated data binding a sealed value to its job and field: a copy into another
    job's row (another id) or into another field does not open."""
    return b"portalq-sealed-v2\x00%d\x00%s\x00%s" % (job_id, job_type.encode(),
                                                      field.encode())


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
    return nonce + AESGCM(kek).encrypt(nonce, dek, key_id.encode())


def _aes_unwrap(kek: bytes, key_id: str, wrapped: bytes) -> bytes:
    try:
        return AESGCM(kek).decrypt(wrapped[:NONCE], wrapped[NONCE:], key_id.encode())
    except InvalidTag:
        raise KeyError_(f"key {key_id!r} does not open this data key (tampered?)") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, what: str) -> bytes:
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
            self._keks[key_id] = _unb64(b64, f"PORTALQ_KEK key {key_id!r}")
            if i == 0:
                self._current = key_id
        if not self._current:
            raise KeyError_("PORTALQ_KEK names no key")
        if hmac_b64:
            self._hmac = _unb64(hmac_b64, "PORTALQ_HMAC_KEY")
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


class FileKeyring:
    """A JSON keyring file, mode 0600: ``{"current": id, "keks": {id: b64}, "hmac": b64}``.

    Created on first use. Re-read when it changes on disk (``portalq keys rotate`` in
    another process), so a running service starts wrapping with a new KEK within moments.
    """

    #: how stale a reader's view may be (a writer -- wrap -- always checks the file)
    RECHECK_SECONDS = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
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
            with self._lock:
                self._create()
            st = self.path.stat()
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            with self._lock:
                data = json.loads(self.path.read_text())
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
            aead = self._aead[key_id] = AESGCM(_unb64(b64, key_id))
        return aead

    def _create(self) -> None:
        if self.path.exists():
            return
        key_id = f"k{_random.token_hex(4)}"
        self._write({"current": key_id, "keks": {key_id: _b64(AESGCM.generate_key(256))},
                     "hmac": _b64(os.urandom(32))}, exclusive=True)

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

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        data = self._load(fresh=False)
        if key_id not in data["keks"]:  # type: ignore[operator]
            data = self._load()   # a key added by a rotation since
        try:
            return self._kek(key_id, data).decrypt(wrapped[:NONCE], wrapped[NONCE:],
                                                   key_id.encode())
        except InvalidTag:
            raise KeyError_(f"key {key_id!r} does not open this data key (tampered?)") from None

    def hmac_key(self) -> bytes:
        data = self._load(fresh=False)
        if self._hmac is None:
            self._hmac = _unb64(str(data["hmac"]), "hmac key")
        return self._hmac

    def key_ids(self) -> list[str]:
        return list(self._keks())

    # -- rotation (portalq keys ...) ---------------------------------------------------------
    def add_current(self) -> str:
        """A new KEK, made current; the old ones stay until retired."""
        data = dict(self._load())
        key_id = f"k{_random.token_hex(4)}"
        data["keks"] = {**self._keks(), key_id: _b64(AESGCM.generate_key(256))}
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


_provider: KeyProvider | None = None
_provider_lock = threading.Lock()


def provider() -> KeyProvider:
    """The process's key provider: installed with :func:`set_provider`, else from the
    environment (``PORTALQ_KEK``), else the key file."""
    global _provider
    if _provider is None:
        with _provider_lock:
            if _provider is None:
                _provider = _from_env()
    return _provider


#: PORTALQ_KEY_PROVIDER values; empty: PORTALQ_KEK if set, else the key file
PROVIDERS = ("file", "env", "vault-transit")


def _from_env() -> KeyProvider:
    kind = os.environ.get("PORTALQ_KEY_PROVIDER", "").strip().lower()
    if kind and kind not in PROVIDERS:
        raise KeyError_(f"PORTALQ_KEY_PROVIDER must be one of {', '.join(PROVIDERS)}, "
                        f"not {kind[:40]!r}")
    if kind == "vault-transit":
        from jobs.vault_transit import VaultTransit

        return VaultTransit.from_env()
    if kind == "env" and not os.environ.get("PORTALQ_KEK"):
        raise KeyError_("PORTALQ_KEY_PROVIDER=env needs PORTALQ_KEK")
    if kind != "file" and os.environ.get("PORTALQ_KEK"):
        return EnvKeys(os.environ["PORTALQ_KEK"], os.environ.get("PORTALQ_HMAC_KEY"))
    path = os.environ.get("PORTALQ_KEY_FILE")
    if path:
        return FileKeyring(Path(path).expanduser())
    from jobs.database import home

    return FileKeyring(home() / "keys.json")


def set_provider(p: KeyProvider | None) -> None:
    """Install a key provider (a KMS/Vault adapter); None: back to the default."""
    global _provider
    _provider = p


# -- sealing ------------------------------------------------------------------------------
class Sealed(NamedTuple):
    key_id: str
    wrapped_dek: bytes
    data: bytes   # [V2 magic +] nonce + AES-GCM ciphertext and tag


class _DataKey:
    """A data key in use: values sealed within a short burst (a batch enqueue, a busy
    minute) share it, each with its own nonce -- one KEK call per burst, not per job."""

    MAX_USES = 1000
    MAX_AGE = 1.0

    def __init__(self, p: KeyProvider) -> None:
        dek = AESGCM.generate_key(256)
        self.provider = p
        self.key_id, self.wrapped = p.wrap(dek)
        self.aead = AESGCM(dek)
        self.uses = 0
        self.born = time.monotonic()
        # nonces: a random 4-byte field and a counter of the key's uses (NIST SP 800-38D
        # 8.2.1, the deterministic construction): unique for this fresh random key, which
        # one thread uses at most MAX_USES times -- no system call per value
        self._fixed = int.from_bytes(os.urandom(4), "big") << 64

    def nonce(self) -> bytes:
        self.uses += 1
        return (self._fixed | self.uses).to_bytes(NONCE, "big")

    def fresh(self, p: KeyProvider) -> bool:
        return (self.provider is p and self.uses < self.MAX_USES
                and time.monotonic() - self.born < self.MAX_AGE
                and self.key_id == p.current_id())


_data_keys = threading.local()


def _forget_data_keys() -> None:
    """In a forked child: the parent's data keys and nonce counters are not ours to go on
    with (the same key and counter in two processes would repeat a nonce)."""
    global _data_keys
    _data_keys = threading.local()


os.register_at_fork(after_in_child=_forget_data_keys)


def seal(plaintext: bytes, p: KeyProvider | None = None, *, aad: bytes | None = None,
         ) -> Sealed:
    """``plaintext`` encrypted (AES-256-GCM) with a data key that is stored wrapped by the
    current KEK next to it. Data keys are shared by the values sealed by one thread within
    a second (at most 1000): erasing a value deletes its ciphertext and its copy of the
    wrapped key; the others' copies open only with the KEK, as any copy would.

    With ``aad`` (:func:`place`) the value is bound to its place (format 2): it opens only
    with the same ``aad``. Nonces never repeat under one data key (see :class:`_DataKey`)."""
    p = p or provider()
    key: _DataKey | None = getattr(_data_keys, "key", None)
    if key is None or not key.fresh(p):
        key = _data_keys.key = _DataKey(p)
    nonce = key.nonce()
    if aad is None:
        return Sealed(key.key_id, key.wrapped,
                      nonce + key.aead.encrypt(nonce, plaintext, _DATA_AAD))
    return Sealed(key.key_id, key.wrapped,
                  b"".join((V2, nonce, key.aead.encrypt(nonce, plaintext, aad))))


def seal_many(items: list[tuple[bytes, bytes]], p: KeyProvider | None = None,
              ) -> list[Sealed]:
    """:func:`seal` of each ``(plaintext, aad)`` (format 2), for a batch: the same data keys
    and nonces as one call per value, without its per-call overhead."""
    p = p or provider()
    out: list[Sealed] = []
    key: _DataKey | None = getattr(_data_keys, "key", None)
    for plaintext, aad in items:
        if key is None or key.uses >= key.MAX_USES or (not out and not key.fresh(p)):
            key = _data_keys.key = _DataKey(p)
        nonce = key.nonce()
        out.append(Sealed(key.key_id, key.wrapped,
                          b"".join((V2, nonce, key.aead.encrypt(nonce, plaintext, aad)))))
    return out


#: recently opened data keys (values sealed in one burst share one): (provider, KEK id,
#: wrapped key) -> cipher. Process memory only, a few hundred entries.
_opened: OrderedDict[tuple[object, str, bytes], AESGCM] = OrderedDict()
_OPENED_MAX = 256


def open_sealed(key_id: str, wrapped_dek: bytes, data: bytes,
                p: KeyProvider | None = None, *, aad: bytes | None = None) -> bytes:
    """The plaintext of a sealed value. A format-2 value opens only with the ``aad`` it was
    sealed with (:class:`NotItsPlace` otherwise, also when ``aad`` is None); a format-1
    value (older rows) opens without."""
    p = p or provider()
    wrapped_dek = bytes(wrapped_dek)
    cache_key = (p, key_id, wrapped_dek)
    aead = _opened.get(cache_key)
    if aead is None:
        aead = AESGCM(p.unwrap(key_id, wrapped_dek))
        _opened[cache_key] = aead
        if len(_opened) > _OPENED_MAX:
            _opened.popitem(last=False)
    data = bytes(data)
    if data[:4] == V2:
        try:
            return aead.decrypt(data[4:4 + NONCE], data[4 + NONCE:], aad or b"")
        except InvalidTag:
            pass   # not its place -- or, once in 2**32, an older value starting so
    try:
        return aead.decrypt(data[:NONCE], data[NONCE:], _DATA_AAD)
    except InvalidTag:
        raise NotItsPlace("sealed data does not open here (altered, or copied from "
                          "another job or field)") from None


def rewrap(key_id: str, wrapped_dek: bytes, p: KeyProvider | None = None) -> tuple[str, bytes]:
    """The same data key wrapped by the current KEK (rotation: the data is not touched)."""
    p = p or provider()
    return p.wrap(p.unwrap(key_id, bytes(wrapped_dek)))


def keyed_hash(text: str, p: KeyProvider | None = None) -> str:
    """HMAC-SHA256 under the provider's secret key (hex, 32 chars): for keys derived from
    personal data, which a bare hash would let anyone reverse by trying all values."""
    key = (p or provider()).hmac_key()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:32]


# -- documents: one self-describing blob --------------------------------------------------
_DOC_MAGIC = b"PQE1"


def seal_blob(plaintext: bytes, p: KeyProvider | None = None, *, aad: bytes | None = None,
              ) -> tuple[str, bytes]:
    """(key id, blob) where blob = magic | len(wrapped) | wrapped DEK | sealed data
    (with ``aad``: bound to its place, see :func:`seal`)."""
    s = seal(plaintext, p, aad=aad)
    return s.key_id, (_DOC_MAGIC + len(s.wrapped_dek).to_bytes(2, "big") + s.wrapped_dek
                      + s.data)


def is_sealed_blob(blob: bytes) -> bool:
    return bytes(blob[:4]) == _DOC_MAGIC


def split_blob(blob: bytes) -> tuple[bytes, bytes]:
    blob = bytes(blob)
    n = int.from_bytes(blob[4:6], "big")
    return blob[6:6 + n], blob[6 + n:]


def open_blob(key_id: str, blob: bytes, p: KeyProvider | None = None, *,
              aad: bytes | None = None) -> bytes:
    wrapped, data = split_blob(blob)
    return open_sealed(key_id, wrapped, data, p, aad=aad)


def rewrap_blob(key_id: str, blob: bytes, p: KeyProvider | None = None) -> tuple[str, bytes]:
    wrapped, data = split_blob(blob)
    new_id, new_wrapped = rewrap(key_id, wrapped, p)
    return new_id, _DOC_MAGIC + len(new_wrapped).to_bytes(2, "big") + new_wrapped + data
