"""Owner-only files and folders, whatever the umask: portalq's home, keys, artifacts,
documents.

Only what portalq creates is made owner-only. A folder that already exists is never
chmod-ed: it may be shared (a sticky ``/tmp``-like folder, another service's), and
tightening it -- as root, on ``/tmp`` -- would lock every other user out. Files are
created 0600 from their first byte, so a shared folder exposes their names, not their
contents. One kind of existing folder is refused: one that group or others may write
without the sticky bit, where anyone could replace portalq's files (its key file) under it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from portalq.jobs.errors import InputError

DIR_MODE = 0o700
FILE_MODE = 0o600


def check_shared(folder: Path) -> None:
    """InputError if group or others may write ``folder`` and it is not sticky (anyone
    could rename or replace what portalq keeps there)."""
    mode = folder.stat().st_mode
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
        raise InputError(f"{folder} is writable by other users and not sticky (mode "
                         f"{stat.filemode(mode)}): portalq will not keep files there "
                         "(chmod go-w it, or choose another folder)")


def check_secret_file(path: Path, st: os.stat_result, what: str) -> None:
    """InputError for a secret file (a key file, a setting holding a password) that others
    may change, or that is this user's own and others may read. Group access is allowed (a
    deliberate share: Kubernetes' fsGroup mounts secrets 0440), and so is a world-readable
    file another user owns (a platform's mount portalq cannot chmod)."""
    mode = st.st_mode
    if mode & stat.S_IWOTH or (st.st_uid == os.geteuid() and mode & stat.S_IROTH):
        raise InputError(f"{what} {path} is {'writable' if mode & stat.S_IWOTH else 'readable'}"
                         f" by others (mode {stat.filemode(mode)}): chmod 600 it")


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created 0700. Folders that already exist are left as
    they are (:func:`check_shared` refuses an unsafe one)."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if p.is_dir():
        check_shared(p)     # the existing folder everything below is made in
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            check_shared(d)   # made by someone else meanwhile: theirs, left as it is
            continue
        os.chmod(d, DIR_MODE)   # ours: mkdir's mode is masked by the umask
    return path


def write_private(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte (no window in which
    another user could open it); replaced atomically unless ``exclusive``. The temporary
    file is a fresh name opened O_EXCL: a name planted in a shared folder (a symlink to
    another file) is never written through."""
    path = Path(path)
    check_shared(path.parent)
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def owner_only_process() -> None:
    """From now on this process creates files 0600 and folders 0700 (umask 077), including
    those other libraries write (Playwright's screenshots and traces, mails)."""
    os.umask(0o077)
