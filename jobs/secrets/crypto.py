"""Envelope encryption for secrets at rest: AES-256-GCM data keys wrapped by a key-encryption
key (KEK) that never enters the database.

Every sealed value has its own random data key (DEK), used for nothing else; the DEK is
stored wrapped by the current KEK next to the ciphertext, with the KEK's id. Erasing a
value deletes its ciphertext and the only wrapping of its key: no other row's key opens a
copy of it. A full copy of the erased row (a heap page before VACUUM, the WAL, a backup)
still opens with the KEK it was wrapped by -- until that KEK is retired. Rotating the KEK
re-wraps DEKs (a few bytes per row), never the data; once no row names the old KEK it can
be deleted (``portalq keys rotate`` then ``retire``), and every copy of the database made
before is then unreadable.

The keys themselves come from a key provider (:mod:`jobs.secrets.key_providers`: a key file, the
environment, Vault Transit, or any object with the :class:`KeyProvider` methods); its
names are re-exported here.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from portalq.jobs import settings
from portalq.jobs.db.location import home
from portalq.jobs.errors import KeyError_
from portalq.jobs.secrets import aead as aead_lib
from portalq.jobs.secrets.key_providers import NONCE, EnvKeys, FileKeyring, KeyProvider

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["NONCE", "PROVIDERS", "V2", "V3", "EnvKeys", "FileKeyring", "KeyError_",
           "KeyProvider", "NotItsPlace", "Sealed", "forget_opened", "is_sealed_blob",
           "keyed_hash", "open_blob", "open_sealed", "place", "provider", "rewrap",
           "rewrap_blob", "seal", "seal_blob", "seal_many", "seal_runs", "set_provider",
           "split_blob"]

# the process's key provider: chosen here, above the providers it chooses among
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
    keys = settings.current(settings.KeySettings)
    kind = keys.key_provider.strip().lower()
    if kind and kind not in PROVIDERS:
        raise KeyError_(f"PORTALQ_KEY_PROVIDER must be one of {', '.join(PROVIDERS)}, "
                        f"not {kind[:40]!r}")
    if kind == "vault-transit":
        # only for this provider: its HTTP client (urllib.request, ssl) is a measured part of
        # importing the queue, which a business's own process does to enqueue
        from portalq.jobs.secrets.vault_transit import VaultTransit

        return VaultTransit.from_env()
    kek = keys.kek.get_secret_value() if keys.kek else ""
    if kind == "env" and not kek:
        raise KeyError_("PORTALQ_KEY_PROVIDER=env needs PORTALQ_KEK")
    if kind != "file" and kek:
        return EnvKeys(kek, keys.hmac_key.get_secret_value() if keys.hmac_key else None)
    if keys.key_file is not None:
        return FileKeyring(keys.key_file.expanduser())
    return FileKeyring(home() / "keys.json")


def set_provider(p: KeyProvider | None) -> None:
    """Install a key provider (a KMS/Vault adapter); None: back to the default."""
    global _provider
    _provider = p


_DATA_AAD = b"portalq-sealed-v1"
#: the stored form of a value bound to its place (format 2): magic + nonce + ciphertext,
#: sealed with associated data naming the place (:func:`place`); format 1 (no magic, one
#: fixed associated data) is what older rows hold, and still opens
V2 = b"PQS2"


class NotItsPlace(KeyError_):
    """The data key opened but the value did not: it was altered, or sealed for another
    place (another job's row, another field) and copied here."""


def place(job_id: int, job_type: str, field: str) -> bytes:
    """The associated data binding a sealed value to its job and field: a copy into another
    job's row (another id) or into another field does not open.
    (``b"portalq-sealed-v2\\0<id>\\0<job type>\\0<field>"``)"""
    return place_template(job_type, field) % job_id


@functools.lru_cache(maxsize=1024)
def place_template(job_type: str, field: str) -> bytes:
    """:func:`place` of ``job_type`` and ``field`` as a template of the job id: ``% job_id``
    gives the associated data (one formatting per value, for a batch)."""
    return b"portalq-sealed-v2\x00%%d\x00%s\x00%s" % (
        job_type.encode().replace(b"%", b"%%"), field.encode().replace(b"%", b"%%"))


# -- sealing ------------------------------------------------------------------------------
#: format 3: as format 2 (magic + nonce + ciphertext, bound to its place), sealed with a data
#: key of its own that sealed nothing else. Erasing the value (its row's wrapped key) then
#: leaves nothing in the database that opens a copy of its ciphertext; formats 1 and 2 (older
#: rows: one data key shared by the values sealed in a burst) still open, and `keys rotate`
#: seals them again in format 3 (:func:`jobs.secrets.rotation.bind_unbound`)
V3 = b"PQS3"
_DEK = 32


class Sealed(NamedTuple):
    key_id: str
    wrapped_dek: bytes
    data: bytes   # [V3 magic +] nonce + AES-GCM ciphertext and tag


def _fresh_keys(n: int, p: KeyProvider) -> tuple[list[bytes], list[bytes],
                                                 list[tuple[str, bytes]]]:
    """``n`` new data keys, a nonce for each, and each key wrapped by the current KEK: one
    read of the random source, one KEK call for all where the provider has ``wrap_many``.
    Each key seals one value: crypto-shredding needs the key to go with the value (a key
    shared by a batch would outlive the erased value in the other rows)."""
    raw = os.urandom((_DEK + NONCE) * n)
    deks = [raw[i:i + _DEK] for i in range(0, _DEK * n, _DEK)]
    nonces = [raw[i:i + NONCE] for i in range(_DEK * n, (_DEK + NONCE) * n, NONCE)]
    many = getattr(p, "wrap_many", None)
    wrapped = list(many(deks)) if many is not None else [p.wrap(d) for d in deks]
    if len(wrapped) != n:
        raise KeyError_(f"the key provider wrapped {len(wrapped)} data keys of {n}")
    return deks, nonces, wrapped


def seal(plaintext: bytes, p: KeyProvider | None = None, *, aad: bytes | None = None,
         ) -> Sealed:
    """``plaintext`` encrypted (AES-256-GCM) with a data key of its own, stored wrapped by
    the current KEK next to it: erasing the value's row erases the only wrapping of its key.

    With ``aad`` (:func:`place`) the value is bound to its place (format 3): it opens only
    with the same ``aad``; without, format 1 (one fixed associated data)."""
    p = p or provider()
    [dek], [nonce], [(key_id, wrapped)] = _fresh_keys(1, p)
    cipher = aead_lib.aesgcm()
    if aad is None:
        return Sealed(key_id, wrapped, nonce + cipher(dek).encrypt(nonce, plaintext, _DATA_AAD))
    return Sealed(key_id, wrapped, V3 + nonce + cipher(dek).encrypt(nonce, plaintext, aad))


def seal_many(items: Iterable[tuple[bytes, bytes]], p: KeyProvider | None = None,
              ) -> list[Sealed]:
    """:func:`seal` of each ``(plaintext, aad)`` (format 3), for a batch: each value with a
    data key of its own, the keys made and wrapped together."""
    plaintexts, aads = [], []
    for plaintext, aad in items:
        plaintexts.append(plaintext)
        aads.append(aad)
    make = tuple.__new__   # Sealed(...) would run a Python-level __new__ for every value
    return [make(Sealed, (key_id, wrapped, data))
            for key_id, wrapped, run in seal_runs(plaintexts, aads, p) for data in run]


def seal_runs(plaintexts: Sequence[bytes], aads: Sequence[bytes], p: KeyProvider | None = None,
              ) -> list[tuple[str, bytes, list[bytes]]]:
    """:func:`seal` (format 3) of each plaintext bound to its associated data:
    ``[(key id, wrapped key, [data]), ...]`` in order, one value per data key (the shape of
    runs sharing a key is kept for the callers). The values are made by C-level loops
    (``map``): the batch enqueue pays the AES-GCM calls per value and little Python."""
    if len(plaintexts) != len(aads):
        raise ValueError("one associated data per plaintext")
    if not plaintexts:
        return []
    p = p or provider()
    deks, nonces, wrapped = _fresh_keys(len(plaintexts), p)
    cipher = aead_lib.aesgcm()
    datas = map(bytes.__add__, map(V3.__add__, nonces),
                map(cipher.encrypt, map(cipher, deks), nonces, plaintexts, aads))
    return [(key_id, w, [data]) for (key_id, w), data in zip(wrapped, datas, strict=True)]


#: recently opened data keys (a job's values are opened more than once: claim, checks):
#: (provider, KEK id, wrapped key) -> cipher. Process memory only, a few hundred entries.
_opened: OrderedDict[tuple[object, str, bytes], AESGCM] = OrderedDict()
_OPENED_MAX = 256


def open_sealed(key_id: str, wrapped_dek: bytes, data: bytes,
                p: KeyProvider | None = None, *, aad: bytes | None = None) -> bytes:
    """The plaintext of a sealed value. A format-2 or -3 value opens only with the ``aad`` it
    was sealed with (:class:`NotItsPlace` otherwise, also when ``aad`` is None); a format-1
    value (older rows) opens without."""
    p = p or provider()
    wrapped_dek = bytes(wrapped_dek)
    cache_key = (p, key_id, wrapped_dek)
    aead = _opened.get(cache_key)
    if aead is None:
        aead = aead_lib.aesgcm()(p.unwrap(key_id, wrapped_dek))
        _opened[cache_key] = aead
        if len(_opened) > _OPENED_MAX:
            _opened.popitem(last=False)
    data = bytes(data)
    if data[:4] in (V2, V3):
        try:
            return aead.decrypt(data[4:4 + NONCE], data[4 + NONCE:], aad or b"")
        except aead_lib.invalid_tag():
            pass   # not its place -- or, once in 2**32, an older value starting so
    try:
        return aead.decrypt(data[:NONCE], data[NONCE:], _DATA_AAD)
    except aead_lib.invalid_tag():
        raise NotItsPlace("sealed data does not open here (altered, or copied from "
                          "another job or field)") from None


def forget_opened() -> None:
    """Drop the opened data keys this process keeps (after a KEK is retired: what it
    wrapped must not go on opening here either)."""
    _opened.clear()


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
