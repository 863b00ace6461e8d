"""Checks shared by the browser tests: artifacts and documents must not hold secrets."""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

SSN = "123-45-6789"


def secret_forms(secret: str) -> list[bytes]:
    digits = re.sub(r"\D", "", secret)
    forms = {secret, digits, f"{digits[:3]}-{digits[3:5]}-{digits[5:]}",
             f"{digits[:3]} {digits[3:5]} {digits[5:]}"}
    return [f.encode() for f in forms]


def inflate_all(data: bytes) -> bytes:
    """``data`` plus every zlib stream found in it (PDF content streams are compressed)."""
    out = [data]
    for m in re.finditer(rb"stream\r?\n", data):
        with_tail = data[m.end():]
        try:
            out.append(zlib.decompressobj().decompress(with_tail))
        except zlib.error:
            pass
    return b"\n".join(out)


def artifact_blobs(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Every artifact file's raw bytes, and every member of every zip (traces) in it."""
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        yield str(path), data
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    yield f"{path}!{name}", z.read(name)


def assert_no_secret(folder: Path, secret: str = SSN) -> int:
    """No form of ``secret`` in any artifact under ``folder``; returns the number checked."""
    forms = secret_forms(secret)
    checked = 0
    for where, data in artifact_blobs(folder):
        checked += 1
        for form in forms:
            assert form not in data, f"{form!r} found in {where}"
    return checked
