"""One table from the two sides' results: marlm's MAPPO beside BenchMARL's, same task, steps, seeds.

    python benchmarks/benchmarl/report.py /tmp/bm/results.jsonl

Reads the JSON lines ``marlm_side.py`` and ``benchmarl_side.py`` appended and prints, per task
and framework: joint environment steps, the seeds, the final return's mean and its spread over
the seeds (min..max, and the standard deviation), the training's wall and CPU seconds summed
over the seeds, and marlm's ratio to BenchMARL (wall and CPU). A column gives the training return
(stochastic policy) at the start and the end of training, to show whether a side learned at all.
The published MAPPO figures of the same task follow as rows marked "published"
(``tasks.PUBLISHED``): their value where it was read from the source, their budget and what
their return sums, since neither need match the rows above. A verdict line per task says
whether marlm's mean return lies within BenchMARL's min..max over the seeds or above it ("met
only trivially" when every seed of both sides ended at one value, as RWARE's 0 deliveries), and
whether marlm's wall time is at most a third of BenchMARL's.
Only the rows present are reported; a task with one side missing says so.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tasks import PUBLISHED  # noqa: E402

FRAMEWORKS = ("marlm", "benchmarl")


def load(path: Path) -> dict[str, dict[str, list[dict]]]:
    """``rows[task][framework]`` -> the result lines, the last line of a (task, framework, seed)
    winning (a re-run replaces an earlier one)."""
    latest: dict[tuple, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            latest[(r["task"], r["framework"], r["seed"])] = r
    rows: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for (task, fw, _), r in sorted(latest.items()):
        rows[task][fw].append(r)
    return rows


def summary(rs: list[dict]) -> dict:
    ret = [r["final_return"] for r in rs]
    return {
        "steps": sorted({r["steps"] for r in rs}),
        "seeds": [r["seed"] for r in rs],
        "mean": statistics.fmean(ret),
        "sd": statistics.stdev(ret) if len(ret) > 1 else 0.0,
        "min": min(ret),
        "max": max(ret),
        "wall": sum(r["wall_s"] for r in rs),
        "cpu": sum(r["cpu_s"] for r in rs),
        "load": (min(r["load"] for r in rs), max(r["load"] for r in rs)),
        "train": train_text(rs),
    }


def train_text(rs: list[dict]) -> str:
    """The seeds' mean training return at the start and at the end of training, ``a -> b``."""
    first = [r["first_train_return"] for r in rs if r.get("first_train_return") is not None]
    last = [r["last_train_return"] for r in rs if r.get("last_train_return") is not None]
    if not first or not last:
        return "-"
    return f"{statistics.fmean(first):.2f} -> {statistics.fmean(last):.2f}"


def table(rows: dict[str, dict[str, list[dict]]]) -> list[str]:
    out = [
        "| task | framework | steps | seeds | final return mean | spread (min..max, sd) "
        "| train return first -> last | wall s | CPU s | wall ratio | CPU ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for task in sorted(rows):
        s = {fw: summary(rows[task][fw]) for fw in FRAMEWORKS if rows[task].get(fw)}
        for fw in FRAMEWORKS:
            if fw not in s:
                out.append(f"| {task} | {fw} | - | - | (not run) | | | | | | |")
                continue
            x = s[fw]
            ratio_w = ratio_c = "1.00"
            if fw == "marlm" and "benchmarl" in s:
                ratio_w = f"{x['wall'] / s['benchmarl']['wall']:.2f}"
                ratio_c = f"{x['cpu'] / s['benchmarl']['cpu']:.2f}"
            elif fw == "marlm":
                ratio_w = ratio_c = "-"
            out.append(
                f"| {task} | {fw} | {'/'.join(map(str, x['steps']))} | "
                f"{','.join(map(str, x['seeds']))} | {x['mean']:.2f} | "
                f"{x['min']:.2f}..{x['max']:.2f}, {x['sd']:.2f} | {x['train']} | "
                f"{x['wall']:.0f} | {x['cpu']:.0f} | {ratio_w} | {ratio_c} |"
            )
        for pub in PUBLISHED.get(task, []):
            value = "not read (see docs)" if pub["value"] is None else f"{pub['value']}"
            out.append(
                f"| {task} | published: {pub['source']} | {pub['budget']} | | {value} | "
                f"returns: {pub['returns']} | | | | | |"
            )
        if "marlm" in s and "benchmarl" in s:
            m, b = s["marlm"], s["benchmarl"]
            if set(m["seeds"]) != set(b["seeds"]) or m["steps"] != b["steps"]:
                verdicts.append(f"{task}: the two sides ran different seeds or steps; no verdict")
                continue
            ret_ok = m["mean"] >= b["min"]
            where = "above" if m["mean"] > b["max"] else "within" if ret_ok else "below"
            met = "met" if ret_ok else "NOT met"
            if m["min"] == m["max"] == b["min"] == b["max"]:  # e.g. no delivery on any seed
                met = f"met only trivially: every seed of both sides ended at {m['mean']:.2f}"
            wall_ok = m["wall"] <= b["wall"] / 3
            verdicts.append(
                f"{task}: marlm's mean return {m['mean']:.2f} is {where} BenchMARL's seed range "
                f"{b['min']:.2f}..{b['max']:.2f} ({met}); wall time "
                f"{m['wall']:.0f} s against {b['wall']:.0f} s, ratio {m['wall'] / b['wall']:.2f} "
                f"({'met' if wall_ok else 'NOT met'}: the target is at most 0.33); load average "
                f"{min(m['load'][0], b['load'][0]):.1f}..{max(m['load'][1], b['load'][1]):.1f}"
            )
        else:
            verdicts.append(f"{task}: one side is missing; no verdict")
    return out + [""] + verdicts


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: report.py results.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if not path.is_file():
        print(
            f"marlm: error: results file {path} does not exist; run the two sides first",
            file=sys.stderr,
        )
        return 2
    print("\n".join(table(load(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
