"""Same-run A/B of two checkouts' workers, PGQueuer beside them (issue 19).

    PQB_HOME=/tmp/pq-bench python bench/ab_drain.py CONC N ROUNDS old=/path/a,new=/path/b

Each checkout needs its own virtualenv (``<checkout>/.venv``, portalq installed there) and
its own bench/bench_portalq.py: its workers run with them, so each side runs its own code
(this file need not be in the older checkout). Run it from any directory; the
bench's own PostgreSQL and database (bench/scale_common.py) are used as they are (migrate
them with the newer checkout first). Per round the checkouts drain N no-op jobs in turn
(order alternating), then PGQueuer once; CONC is ``def`` or a number, as in
bench_portalq.py. Printed: each side's median jobs/s, its ratio to PGQueuer's median, and
the worker's CPU time a job (getrusage from the GO of the handshake to its exit).
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def worker(bench_dir: str, conc: str, mode: str) -> None:
    """A worker of the checkout whose bench/ is ``bench_dir`` (run by that checkout's
    python), appending "CPU at GO, CPU at exit" to $AB_CPU_OUT."""
    import atexit
    import resource

    sys.path[:0] = [bench_dir]
    import bench_portalq
    import common

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    marks: list[float] = []
    handshake = common.worker_handshake

    def go() -> None:
        handshake()
        marks.append(cpu())

    def done() -> None:
        if marks:
            with open(os.environ["AB_CPU_OUT"], "a") as f:
                f.write(f"{marks[0]} {cpu()}\n")

    common.worker_handshake = go
    atexit.register(done)
    bench_portalq.worker_main(conc, mode)


def main() -> None:
    sys.path.insert(0, str(HERE))
    import scale_common as sc

    conc, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    trees = dict(t.split("=", 1) for t in sys.argv[4].split(","))
    sc.ensure_server()
    rates: dict[str, list[float]] = {k: [] for k in [*trees, "pgqueuer"]}
    for k in trees:
        Path(sc.HOME / f"ab-cpu-{k}.txt").unlink(missing_ok=True)
    for r in range(rounds):
        for label in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            tree = Path(trees[label])
            os.environ["AB_CPU_OUT"] = str(sc.HOME / f"ab-cpu-{label}.txt")
            cmd = [str(tree / ".venv/bin/python"), __file__, "--worker", str(tree / "bench")]
            object.__setattr__(sc.PQ, "worker_cmd", lambda c, m, cmd=cmd: [*cmd, c, m])
            rates[label].append(sc.drain(sc.PQ, n, conc)["jobs_s"])
        rates["pgqueuer"].append(sc.drain(sc.PGQ, n, conc)["jobs_s"])
        print(r + 1, {k: round(v[-1]) for k, v in rates.items()}, flush=True)
    peer = statistics.median(rates["pgqueuer"])
    for k, v in rates.items():
        line = f"{k:10s} median {statistics.median(v):8,.0f} jobs/s {[round(x) for x in v]}"
        if k in trees:
            cpu = [(float(b) - float(a)) / n * 1e6 for a, b in
                   (ln.split() for ln in (sc.HOME / f"ab-cpu-{k}.txt").read_text().split("\n")
                    if ln)]
            line += (f"  {statistics.median(v) / peer:.2f}x PGQueuer, worker CPU "
                     f"{statistics.median(cpu):.0f} us a job")
        print(line)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
