"""Table and plot of a ``harness.py`` results file beside POGEMA's published per-seed means.

Usage: ``report.py results.jsonl`` -> ``results.md`` (markdown table) and ``results.png``.
Published figures: POGEMA benchmark (Skrynnik et al., ICLR 2025), raw_data_LMAPF/03-warehouse,
averaged here over the same seeds as the run (and over all 128 in brackets).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "data" / "03-warehouse-published.json"
OURS = ("marlm", "marlm_hand", "marlm_learned", "pogema_a_star")
BOUND = "free_flow"


def _num(x: float) -> str:
    """``x`` to 2 decimals; ``-`` where there is no figure (no published result at that count)."""
    return "-" if np.isnan(x) else f"{x:.2f}"


def load(path: Path) -> dict:
    rows = defaultdict(lambda: defaultdict(dict))
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[r["algorithm"]][r["num_agents"]][r["seed"]] = r
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: report.py results.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    rows = load(path)
    published = json.loads(PUBLISHED.read_text())["per_seed"]
    agents = sorted({n for alg in rows.values() for n in alg})
    seeds = sorted({s for alg in rows.values() for n in alg.values() for s in n})
    lines = [
        f"Average throughput (targets per step), seeds {seeds[0]}..{seeds[-1]} "
        f"({len(seeds)} seeds); published means over the same seeds [all 128 in brackets].",
        "",
        "| algorithm | " + " | ".join(str(n) for n in agents) + " |",
        "|---|" + "---|" * len(agents),
    ]
    series = {}
    for alg in OURS:
        if alg not in rows:
            continue
        vals = [np.mean([r["avg_throughput"] for r in rows[alg][n].values()]) for n in agents]
        series[alg] = vals
        lines.append(f"| {alg} (this run) | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    if BOUND in rows:
        vals = [np.mean([r["avg_throughput"] for r in rows[BOUND][n].values()]) for n in agents]
        series[BOUND] = vals
        lines.append("| free-flow bound (each agent alone) | "
                     + " | ".join(f"{v:.2f}" for v in vals) + " |")  # fmt: skip
    for alg in ("marlm", "marlm_learned"):
        if "marlm_hand" not in rows or alg not in rows:
            continue
        cells = []
        for n in agents:
            common = sorted(set(rows["marlm_hand"][n]) & set(rows[alg][n]))
            r = np.array([rows[alg][n][s]["avg_throughput"]
                          / rows["marlm_hand"][n][s]["avg_throughput"] for s in common])  # fmt: skip
            wins, ties = int((r > 1).sum()), int((r == 1).sum())
            cells.append(
                f"{r.mean():.3f} ± {r.std():.3f}, min {r.min():.3f} "
                f"({wins} won, {ties} tied of {len(r)} seeds)"
            )
        lines.append(f"| {alg} / marlm_hand (per seed, mean ± sd) | " + " | ".join(cells) + " |")
    counts = [len(rows[alg][n]) for n in agents for alg in (OURS[0],) if alg in rows]
    if counts:
        lines.append("| seeds (marlm) | " + " | ".join(map(str, counts)) + " |")
    best = np.zeros(len(agents))
    for alg, per_n in published.items():
        same, every = [], []
        for n in agents:
            per_seed = per_n.get(str(n), {})  # none at a count the benchmark did not run
            on_seeds = [per_seed[str(s)] for s in seeds if str(s) in per_seed]
            same.append(np.mean(on_seeds) if on_seeds else np.nan)
            every.append(np.mean(list(per_seed.values())) if per_seed else np.nan)
        series[alg] = same
        best = np.fmax(best, same)
        cells = [_num(a) + f" [{_num(b)}]" for a, b in zip(same, every, strict=True)]
        lines.append(f"| {alg} (published) | " + " | ".join(cells) + " |")
    for alg in ("marlm", "marlm_hand", "marlm_learned"):
        if alg in series:
            ratio = np.array(series[alg]) / np.where(best > 0, best, np.nan)
            lines.append(f"| {alg} / best published | " + " | ".join(map(_num, ratio))
                         + " |")  # fmt: skip
            if BOUND in series:
                ratio = np.array(series[alg]) / np.array(series[BOUND])
                lines.append(f"| {alg} / free-flow bound | "
                             + " | ".join(f"{r:.2f}" for r in ratio) + " |")  # fmt: skip
    for alg in OURS:
        if alg in rows and alg != BOUND:
            rev = [sum(r["reverted_moves"] for r in rows[alg][n].values()) for n in agents]
            ms = [np.mean([r["ms_per_step"] for r in rows[alg][n].values()]) for n in agents]
            lines.append(f"| {alg} reverted moves (sum) | " + " | ".join(map(str, rev)) + " |")
            cpu = [np.mean([r.get("cpu_ms_per_step", np.nan) for r in rows[alg][n].values()])
                   for n in agents]  # fmt: skip
            lines.append(
                f"| {alg} ms per step (wall) | " + " | ".join(f"{m:.2f}" for m in ms) + " |"
            )
            lines.append(
                f"| {alg} ms per step (CPU) | " + " | ".join(f"{m:.2f}" for m in cpu) + " |"
            )
    table = "\n".join(lines) + "\n"
    path.with_suffix(".md").write_text(table)
    print(table)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for alg, vals in series.items():
        style = "-o" if alg in OURS else ":k" if alg == BOUND else "--."
        label = alg + ("" if alg in OURS else " (bound)" if alg == BOUND else " (published)")
        ax.plot(agents, vals, style, label=label)
    ax.set_xlabel("agents")
    ax.set_ylabel("average throughput (targets / step)")
    ax.set_title("POGEMA wfi_warehouse, lifelong, 256 steps, soft collisions")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=100)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
