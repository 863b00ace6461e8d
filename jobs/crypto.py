"""Envelope encryption for secrets at rest: AES-256-GCM data keys wrapped by a key-encryption
key (KEK) that never enters the database.

Every sealed value has its own random data key (DEK); the DEK is stored wrapped by the
current KEK next to the ciphertext, with the KEK's id. Rotating the KEK re-wraps DEKs (a
few bytes per row), never the data; once no row names the old KEK it can be deleted, and
every copy of the database made before (dumps, WAL, backups) is then unreadable.

The keys themselves come from a key provider (:mod:`jobs.key_providers`: a key file, the
environment, Vault Transit, or any object with the :class:`KeyProvider` methods); its
names are re-exported here.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from portalq.jobs.key_providers import (
    NONCE,
    PROVIDERS,
    EnvKeys,
    FileKeyring,
    KeyError_,
    KeyProvider,
    provider,
    set_provider,
)

__all__ = ["NONCE", "PROVIDERS", "V2", "EnvKeys", "FileKeyring", "KeyError_", "KeyProvider",
           "NotItsPlace", "Sealed", "is_sealed_blob", "keyed_hash", "open_blob",
           "open_sealed", "place", "provider", "rewrap", "rewrap_blob", "seal", "seal_blob",
           "seal_many", "seal_runs", "set_provider", "split_blob"]

_DATA_AAD = b"portalq-sealed-v1"
#: the stored form of a value bound to its place (format 2): magic + nonce + ciphertext,
#: sealed with associated data naming the place (:func:`place`); format 1 (no magic, one
#: fixed associated data) is what older rows hold, and still opens
V2 = b"PQS2"
_V2_INT = int.from_bytes(V2, "big") << (8 * NONCE)
_HEAD = len(V2) + NONCE
_NONCE_OF = itemgetter(slice(len(V2), None))


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
        #: the head of a format-2 value as one integer: magic | nonce without its counter
        self.head = _V2_INT | self._fixed

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


def seal_many(items: Iterable[tuple[bytes, bytes]], p: KeyProvider | None = None,
              ) -> list[Sealed]:
    """:func:`seal` of each ``(plaintext, aad)`` (format 2), for a batch: the same data keys
    and nonces as one call per value, without its per-call overhead."""
    plaintexts, aads = [], []
    for plaintext, aad in items:
        plaintexts.append(plaintext)
        aads.append(aad)
    make = tuple.__new__   # Sealed(...) runs a Python-level __new__: ~0.3 us a value
    return [make(Sealed, (key_id, wrapped, data))
            for key_id, wrapped, run in seal_runs(plaintexts, aads, p) for data in run]


def seal_runs(plaintexts: Sequence[bytes], aads: Sequence[bytes], p: KeyProvider | None = None,
              ) -> list[tuple[str, bytes, list[bytes]]]:
    """:func:`seal` (format 2) of each plaintext bound to its associated data, in runs of
    values sharing a data key: ``[(key id, wrapped key, [data, ...]), ...]`` in order.
    Each run's nonces are counted off its key before any is used (never handed out twice,
    even if sealing fails midway), and the values are made by C-level loops (``map``): the
    batch enqueue pays about the AES-GCM call per value and little Python around it."""
    if len(plaintexts) != len(aads):
        raise ValueError("one associated data per plaintext")
    if not plaintexts:
        return []
    p = p or provider()
    key: _DataKey | None = getattr(_data_keys, "key", None)
    if key is None or not key.fresh(p):
        key = _data_keys.key = _DataKey(p)
    out: list[tuple[str, bytes, list[bytes]]] = []
    done, total = 0, len(plaintexts)
    while done < total:
        if key.uses >= key.MAX_USES:
            key = _data_keys.key = _DataKey(p)
        first = key.uses + 1
        m = min(key.MAX_USES - key.uses, total - done)
        key.uses += m
        if m == 1:   # a single enqueue: without the C loops' setup
            start = (key.head | first).to_bytes(_HEAD, "big")
            out.append((key.key_id, key.wrapped, [
                start + key.aead.encrypt(start[4:], plaintexts[done], aads[done])]))
            done += 1
            continue
        # each value's head: magic + nonce (random field, counter), one int.to_bytes
        heads = list(map(int.to_bytes,  # type: ignore[arg-type]  # repeat("big") is str
                         range(key.head | first, key.head | (first + m)),
                         repeat(_HEAD), repeat("big")))
        sealed = map(key.aead.encrypt, map(_NONCE_OF, heads),
                     plaintexts[done:done + m], aads[done:done + m])
        out.append((key.key_id, key.wrapped, list(map(bytes.__add__, heads, sealed))))
        done += m
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
