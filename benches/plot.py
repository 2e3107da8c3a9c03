"""Plots benches/results/w1.jsonl and w5.jsonl (the load generator's output)
as time to [DONE] against concurrency: benches/latency.png."""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = pathlib.Path(__file__).parent
runs = {}
for name in ("w1", "w5"):
    rows = [json.loads(line) for line in (here / "results" / f"{name}.jsonl").read_text().splitlines() if line]
    runs[name] = sorted(rows, key=lambda r: r["concurrency"])

fig, (latency, rate) = plt.subplots(1, 2, figsize=(11, 4.2))
labels = {"w1": "toolgate, count to 100 (W1)", "w5": "bare axum, same bytes (W5)"}
for name, rows in runs.items():
    c = [r["concurrency"] for r in rows]
    for q, style in (("p50", "-o"), ("p99", "--o")):
        latency.plot(c, [r["doneMs"][q] for r in rows], style, label=f"{labels[name]} {q}")
    rate.plot(c, [r["turnsPerSec"] for r in rows], "-o", label=labels[name])
for ax in (latency, rate):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.grid(True, alpha=0.3)
latency.set_yscale("log")
latency.set_ylabel("time to [DONE], ms")
latency.legend(fontsize=7)
rate.set_ylabel("turns/s")
rate.legend(fontsize=7)
fig.suptitle("Load generator and server on one 2-core machine")
fig.tight_layout()
fig.savefig(here / "latency.png", dpi=110)
