"""Owner-only files and folders, whatever the umask: portalq's home, keys, artifacts,
documents. Parent folders are never changed."""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created 0700; an existing ``path`` tightened to 0700.
    Parents that already exist are left as they are."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(d, DIR_MODE)   # mkdir's mode is masked by the umask
    if path.is_dir() and (path.stat().st_mode & 0o777) != DIR_MODE and os.access(path, os.W_OK):
        if path.stat().st_uid == os.geteuid():
            os.chmod(path, DIR_MODE)
    return path


def write_private(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte (no window in which
    another user could open it); replaced atomically unless ``exclusive``."""
    path = Path(path)
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)


def tighten_tree(root: Path) -> None:
    """Folders 0700 and files 0600 under ``root`` (files written by other libraries, e.g.
    Playwright's screenshots and traces, follow the umask)."""
    for dirpath, _dirs, names in os.walk(root):
        os.chmod(dirpath, DIR_MODE)
        for name in names:
            f = os.path.join(dirpath, name)
            if not os.path.islink(f):
                os.chmod(f, FILE_MODE)


def owner_only_process() -> None:
    """From now on this process creates files 0600 and folders 0700 (umask 077), including
    those other libraries write (Playwright's screenshots and traces, mails)."""
    os.umask(0o077)
