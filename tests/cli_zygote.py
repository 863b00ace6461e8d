"""A fork server for ``run_cli``: each pytest process pays the CLI's third-party imports once.

``portalq`` as a command spends about a second importing (pydantic, psycopg, SQLAlchemy,
typer, cryptography: ~90 % of it third-party) before it does anything; ``make test`` runs
it about a thousand times. This server imports those libraries -- and nothing of portalq,
so every portalq module still reads its settings and environment in a fresh process --
then forks one child per call: a real process with its own pid, environment, working
directory, stdin/stdout/stderr pipes and exit status, running ``python -m portalq``'s
``__main__`` through :mod:`runpy` as the interpreter would.

A call whose environment changes how Python itself starts (``PYTHON*`` variables) is
not served here (the caller runs a plain subprocess). ``PORTALQ_TEST_CLI=subprocess``
turns the server off.

Protocol, one Unix-socket connection per call: the caller sends a JSON request (argv,
env, cwd) with its three pipe ends (``socket.send_fds``); the child writes its pid, then
its exit code when done; EOF without a code means it was killed.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

#: the third-party (and standard) modules the CLI imports on every start
PRELOAD = ("asyncio", "http.client", "urllib.request", "logging.handlers", "zoneinfo",
           "psycopg", "psycopg_pool", "pydantic", "pydantic_settings", "typer", "click",
           "sqlalchemy", "sqlalchemy.dialects.postgresql", "alembic",
           "cryptography.hazmat.primitives.ciphers.aead")
PID = struct.Struct("!i")


def _child(conn: socket.socket, fds: list[int], request: dict[str, object]) -> None:
    """In the forked child: become ``python -m portalq <argv>`` and never return."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)   # the CLI may wait for its children
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])   # type: ignore[arg-type]
        time.tzset()
        import random
        random.seed()   # not the server's sequence
        conn.sendall(PID.pack(os.getpid()))
        module = str(request.get("module") or "portalq")
        sys.argv = [module, *request["argv"]]   # type: ignore[misc]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (
                0 if done.code is None else 1)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        # what the interpreter does at exit: wait for non-daemon threads, run atexit
        getattr(threading, "_shutdown", lambda: None)()
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(BaseException):
            conn.sendall(PID.pack(code & 0xFF))
        os._exit(code & 0xFF)


def serve(path: str) -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # children are reaped by the kernel
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    print("ready", flush=True)
    while os.getppid() == parent:   # gone with the pytest process that started it
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        try:
            conn.settimeout(None)
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            while not msg.endswith(b"\n"):
                more = conn.recv(1 << 20)
                if not more:
                    break
                msg += more
            if os.fork() == 0:
                listener.close()
                _child(conn, fds, json.loads(msg))
            for fd in fds:
                os.close(fd)
        finally:
            conn.close()


class Client:
    """The pytest process's side: starts its server on first use, one call at a time per
    connection (calls from several threads each have their own)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._proc: subprocess.Popen[bytes] | None = None
        self._path = ""
        self._env: dict[str, str] = {}
        self._lock = threading.Lock()

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="portalq-cli-")
        self._path = os.path.join(folder, "zygote.sock")
        self._env = dict(os.environ)
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote", self._path],
                                      cwd=self.root, env=self._env, stdout=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL)
        assert self._proc.stdout is not None
        if self._proc.stdout.readline() != b"ready\n":
            raise RuntimeError("the CLI fork server did not start")
        atexit.register(shutil.rmtree, folder, True)
        atexit.register(self._proc.kill)   # runs first: the server goes, then its folder

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a call with ``env`` runs as it would in a fresh interpreter here."""
        with self._lock:
            if self._proc is None:
                self._start()
        python = {k: v for k, v in env.items() if k.startswith("PYTHON")}
        return python == {k: v for k, v in self._env.items() if k.startswith("PYTHON")}

    def run(self, argv: list[str], env: dict[str, str], cwd: str, timeout: float,
            input: str | None, module: str = "portalq") -> subprocess.CompletedProcess[str]:
        """``python -m <module> <argv>`` (the CLI; another module in this server's test)."""
        ends = [os.pipe() for _ in range(3)]
        theirs = [ends[0][0], ends[1][1], ends[2][1]]
        stdin, out, err = ends[0][1], ends[1][0], ends[2][0]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self._path)
            data = json.dumps({"argv": argv, "env": env, "cwd": cwd,
                               "module": module}).encode() + b"\n"
            sent = socket.send_fds(sock, [data], theirs)
            sock.sendall(data[sent:])
        finally:
            for fd in theirs:
                os.close(fd)
        return _collect(sock, stdin, out, err, (input or "").encode(), timeout,
                        [sys.executable, "-m", module, *argv])


def _collect(sock: socket.socket, stdin: int, out: int, err: int, data: bytes,
             timeout: float, cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """subprocess.run's communicate: stdin fed, stdout and stderr read, the exit code."""
    status = sock.fileno()
    got = {out: bytearray(), err: bytearray(), status: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in got:
        sel.register(fd, selectors.EVENT_READ)
    if data:
        os.set_blocking(stdin, False)
        sel.register(stdin, selectors.EVENT_WRITE)
    else:
        os.close(stdin)
        stdin = -1
    deadline = time.monotonic() + timeout
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                if len(got[status]) >= PID.size:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(PID.unpack(got[status][:PID.size])[0], signal.SIGKILL)
                raise subprocess.TimeoutExpired(cmd, timeout, bytes(got[out]), bytes(got[err]))
            for key, _ in sel.select(left):
                if key.fd == stdin:
                    try:
                        data = data[os.write(stdin, data[:65536]):]
                    except BrokenPipeError:   # it exited without reading it all
                        data = b""
                    if not data:
                        sel.unregister(stdin)
                        os.close(stdin)
                        stdin = -1
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    got[key.fd] += chunk
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        sock.close()
        for fd in (out, err, stdin):
            if fd >= 0:
                os.close(fd)
    told = bytes(got[status])
    if len(told) < PID.size:
        raise RuntimeError("the CLI fork server's child died before it started")
    # no exit code after the pid: killed (subprocess says -signal; the signal is unknown)
    code = PID.unpack(told[PID.size:2 * PID.size])[0] if len(told) >= 2 * PID.size else -9
    return subprocess.CompletedProcess(cmd, code, _text(got[out]), _text(got[err]))


def _text(raw: bytearray) -> str:
    """As ``text=True`` decodes: the locale's encoding, universal newlines."""
    return raw.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace(
        "\r", "\n")


if __name__ == "__main__":
    serve(sys.argv[1])
