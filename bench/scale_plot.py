"""The soak's plot (scale_bench.py plot): throughput, pickup p99 and job_queue + job_events
size over time, one line per soak result found (e.g. before and after the tuning
migration). matplotlib is a bench-only dependency (make bench-scale installs it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import scale_bench as sb

OUT = Path(os.environ.get("SOAK_PNG", Path(__file__).resolve().parents[1] / "docs"
                          / "benchmarks-soak.png"))


def plot() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted(sb.RESULTS.glob("soak-*.json"))
    if not runs:
        raise SystemExit("scale_bench: error: no soak results; run `scale_bench.py soak` first")
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for path in runs:
        r = json.loads(path.read_text())
        label = path.stem.removeprefix("soak-")
        # the minutes the producer ran (a last partial minute is the drain's tail)
        mins = [m for m in r["per_minute"] if "minute" in m and m["minute"] <= r["minutes"]]
        ax1.plot([m["minute"] for m in mins], [m["jobs_s"] for m in mins], marker="o", label=label)
        ax2.plot([m["minute"] for m in mins], [m["p99_ms"] for m in mins], marker="o", label=label)
        ts = [s["t"] / 60 for s in r["samples"]]
        size = [sum(t[0] + t[1] for t in s["tables"].values()) / 2**20 for s in r["samples"]]
        ax3.plot(ts, size, label=f"{label}: job_queue + job_events")
        if r["retention_s"]:
            ax3.axvline(r["retention_s"] / 60, color="grey", linestyle=":")
    ax1.set_ylabel("completed jobs/s")
    ax2.set_ylabel("pickup p99 (ms, log)")
    ax2.set_yscale("log")
    ax3.set_ylabel("tables + indexes (MiB)")
    ax3.set_xlabel("minute of the soak (dotted: retention reached)")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("portalq soak: enqueue and drain together")
    fig.tight_layout()
    fig.savefig(OUT, dpi=90)
    print(f"wrote {OUT}")


PARTS = {"plot": plot}
