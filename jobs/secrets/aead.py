"""AES-GCM (``cryptography``), imported at its first use: an idle worker that never opens a
sealed job does not load it (~7 MiB resident of the worker's ~60; issue 49.2, measured by
each import's resident size). The first seal or open pays the import once (~20 ms)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM


@cache
def aesgcm() -> type[AESGCM]:
    # imported at first use: an idle worker never loads it (the module's docstring)
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM


@cache
def invalid_tag() -> type[Exception]:
    """What a wrong key or altered data raises (``except invalid_tag():``)."""
    # imported at first use, as aesgcm()
    from cryptography.exceptions import InvalidTag

    return InvalidTag
