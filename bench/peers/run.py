"""``make bench``: portalq against PGQueuer and Procrastinate, in the same run, on one
PostgreSQL, by the method of ``common.py``; from the repository alone.

- PGQueuer and Procrastinate (pinned: ``PGQUEUER_SPEC``, ``PROCRASTINATE_SPEC``) are
  installed from PyPI into a venv of the bench's own (``BENCH_VENV``, default
  ``.venv-bench``), never into portalq's: each driver runs under its library's interpreter
  (portalq's under portalq's virtualenv, ``PORTALQ_PYTHON``).
- PostgreSQL: the server answering on ``PGHOST:PGPORT`` if one does; else one made with
  ``initdb`` under ``WORK`` (``PGBIN``: the newest /usr/lib/postgresql/*/bin, else
  ``pg_config --bindir``), started with default settings and stopped at the end.
- ``REPS`` repetitions, the libraries' order reversed every other one; the table
  (``report.py``) gives each figure's median (min-max) and portalq's ratio to PGQueuer.

Knobs: LIBS (default "portalq pgqueuer procrastinate"), REPS (3), WORK (/tmp/pq-peers),
RUN_TIMEOUT (s per driver run, 600), and those of ``common.py`` (N, BATCH, ...).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = Path(os.environ.get("WORK", "/tmp/pq-peers"))
VENV = Path(os.environ.get("BENCH_VENV", ROOT / ".venv-bench"))
PORTALQ_PYTHON = os.environ.get("PORTALQ_PYTHON", str(ROOT / ".venv/bin/python"))
LIBS = os.environ.get("LIBS", "portalq pgqueuer procrastinate").split()
REPS = int(os.environ.get("REPS", "3"))
RUN_TIMEOUT = float(os.environ.get("RUN_TIMEOUT", "600"))
SPECS = [os.environ.get("PGQUEUER_SPEC", "pgqueuer==1.6.0"),
         os.environ.get("PROCRASTINATE_SPEC", "procrastinate==3.10.0"),
         "asyncpg", "psycopg[binary]"]
DRIVERS = {"portalq": ROOT / "bench/bench_portalq.py"}


def say(text: str) -> None:
    print(f"[bench] {text}", flush=True)


def peers_python() -> str:
    python = VENV / "bin/python"
    probe = [str(python), "-c", "import pgqueuer, procrastinate, asyncpg, psycopg"]
    if not python.exists() or subprocess.run(probe, capture_output=True).returncode:
        say(f"installing {', '.join(SPECS[:2])} into {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *SPECS], check=True)
    return str(python)


def pg_bin() -> Path:
    if os.environ.get("PGBIN"):
        return Path(os.environ["PGBIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1])
    return Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                               check=True).stdout.strip())


class Server:
    """The PostgreSQL the run uses: one already answering, or one of its own."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.data = WORK / "pg/data"
        self.host = os.environ.setdefault("PGHOST", "127.0.0.1")
        self.port = os.environ.setdefault("PGPORT", "55434")
        os.environ.setdefault("PGUSER", "postgres")
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.started = False

    def answering(self) -> bool:
        return subprocess.run([str(self.bin / "pg_isready"), "-q", "-h", self.host, "-p",
                               self.port]).returncode == 0

    def __enter__(self) -> Server:
        if self.answering():
            say(f"using the PostgreSQL answering on {self.host}:{self.port}")
            return self
        self.data.parent.mkdir(parents=True, exist_ok=True)
        if self.as_pg:
            shutil.chown(self.data.parent, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            subprocess.run([*self.as_pg, str(self.bin / "initdb"), "-D", str(self.data),
                            "-U", "postgres", "--auth=trust", "-E", "UTF8"], check=True,
                           capture_output=True)
        subprocess.run([*self.as_pg, str(self.bin / "pg_ctl"), "-D", str(self.data), "-w",
                        "-l", str(self.data.parent / "server.log"), "-o",
                        f"-p {self.port} -k {self.data.parent} -c listen_addresses={self.host}",
                        "start"], check=True, capture_output=True)
        self.started = True
        say(f"started PostgreSQL in {self.data} on port {self.port}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.started:
            subprocess.run([*self.as_pg, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                            "fast", "-w", "stop"], capture_output=True)
            say("stopped the PostgreSQL it started")


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    WORK.chmod(0o755)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    os.environ["OUT"] = out = str(WORK / f"results-{stamp}.jsonl")
    os.environ["LOGDIR"] = str(WORK / f"logs-{stamp}")
    os.makedirs(os.environ["LOGDIR"], exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    peers = peers_python() if set(LIBS) - {"portalq"} else ""
    python = {lib: PORTALQ_PYTHON if lib == "portalq" else peers for lib in LIBS}
    driver = {lib: str(DRIVERS.get(lib, HERE / f"bench_{lib}.py")) for lib in LIBS}
    failed = 0
    started = time.monotonic()
    with Server():
        for lib in LIBS:
            subprocess.run([python[lib], driver[lib], "setup"], check=True, timeout=300)
            subprocess.run([python[lib], driver[lib], "meta"], check=True,
                           stdout=subprocess.DEVNULL)
        for rep in range(1, REPS + 1):
            for lib in (LIBS if rep % 2 else LIBS[::-1]):
                try:
                    rc = subprocess.run([python[lib], driver[lib], "run"], timeout=RUN_TIMEOUT,
                                        env={**os.environ, "REP": str(rep)}).returncode
                except subprocess.TimeoutExpired:
                    rc = -1
                if rc:
                    failed += 1
                    say(f"{lib}, repetition {rep}: exit {rc} (logs in {os.environ['LOGDIR']})")
    load = os.getloadavg()
    say(f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, "
        f"{time.monotonic() - started:.0f} s; results {out}")
    subprocess.run([PORTALQ_PYTHON, str(HERE / "report.py"), out], check=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
