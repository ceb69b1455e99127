"""Tables from the two sides' results: marlm's learners beside BenchMARL's, same task, steps, seeds.

    python benchmarks/benchmarl/report.py benchmarks/benchmarl/data/simple_spread-200k-2026-12-05.jsonl

Reads the JSON lines ``marlm_side.py`` and ``benchmarl_side.py`` appended and prints, per task
and algorithm (lines without ``algorithm`` are MAPPO's, as every line was before QMIX):

- a table, one row per framework: joint environment steps, the seeds, the first evaluation's
  mean over the seeds (the deterministic policy after the first batch), the final return's mean
  and its spread over the seeds (min..max, and the standard deviation), the training return
  (stochastic policy) at the start and the end of training, the training's wall and CPU seconds
  summed over the seeds, and marlm's ratio to BenchMARL (wall and CPU). The published figures of
  the same task and algorithm follow as rows marked "published" (``tasks.PUBLISHED``, MAPPO's);
- the evaluation curves, one row per evaluation step: each side's mean over the seeds and its
  min..max;
- a verdict line per criterion: (1) both sides' final evaluation above their first on every seed
  (naming each seed that was not), (2) marlm's mean final return within BenchMARL's min..max over
  the seeds or above it ("met only trivially" when every seed of both sides ended at one value,
  as RWARE's 0 deliveries), (3) marlm's wall time at most a third of BenchMARL's; with the load
  averages the runs ended at.

Only the rows present are reported; a task with one side missing says so. The output depends on
the file alone (rows sorted by task, algorithm, framework and seed).
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
HEADER = (
    "| task | algorithm | framework | steps | seeds | first evaluation mean | final return mean "
    "| spread (min..max, sd) | train return first -> last | wall s | CPU s | wall ratio "
    "| CPU ratio |"
)

Rows = dict[tuple[str, str], dict[str, list[dict]]]


def load(path: Path) -> Rows:
    """``rows[(task, algorithm)][framework]`` -> the result lines, the last line of a (task,
    algorithm, framework, seed) winning (a re-run replaces an earlier one)."""
    latest: dict[tuple, dict] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            r.setdefault("algorithm", "mappo")
            latest[(r["task"], r["algorithm"], r["framework"], r["seed"])] = r
    rows: Rows = defaultdict(lambda: defaultdict(list))
    for (task, algorithm, fw, _), r in sorted(latest.items()):
        rows[(task, algorithm)][fw].append(r)
    return rows


def first_eval(r: dict) -> float | None:
    """The first evaluation's return (after the first batch), None for lines without a curve."""
    if r.get("evals"):
        return float(r["evals"][0][1])
    return r.get("first_eval")


def summary(rs: list[dict]) -> dict:
    ret = [r["final_return"] for r in rs]
    firsts = [f for f in map(first_eval, rs) if f is not None]
    return {
        "steps": sorted({r["steps"] for r in rs}),
        "seeds": [r["seed"] for r in rs],
        "first": statistics.fmean(firsts) if len(firsts) == len(rs) else None,
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


def curves(task: str, algorithm: str, by_fw: dict[str, list[dict]]) -> list[str]:
    """One row per evaluation step: each side's mean over its seeds and min..max."""
    at: dict[str, dict[int, list[float]]] = {fw: defaultdict(list) for fw in FRAMEWORKS}
    for fw in FRAMEWORKS:
        for r in by_fw.get(fw, []):
            for step, ret in r.get("evals") or []:
                at[fw][int(step)].append(float(ret))
    steps = sorted(set(at["marlm"]) | set(at["benchmarl"]))
    if not steps:
        return []
    out = [
        f"Evaluation curves, {task} {algorithm} (deterministic policy, mean over seeds and "
        "min..max):",
        "",
        "| step | marlm mean | marlm min..max | BenchMARL mean | BenchMARL min..max |",
        "|---|---|---|---|---|",
    ]
    for step in steps:
        cells = []
        for fw in FRAMEWORKS:
            v = at[fw].get(step, [])
            if v:
                cells += [f"{statistics.fmean(v):.2f}", f"{min(v):.2f}..{max(v):.2f} ({len(v)})"]
            else:
                cells += ["-", "-"]
        out.append(f"| {step} | " + " | ".join(cells) + " |")
    return out


def improved(by_fw: dict[str, list[dict]]) -> str:
    """Criterion 1: every seed of both sides ends above its first evaluation."""
    missing, failed, seen = [], [], 0
    for fw in FRAMEWORKS:
        for r in by_fw[fw]:
            f = first_eval(r)
            if f is None or not r.get("evals"):
                missing.append(f"{fw} seed {r['seed']}")
                continue
            seen += 1
            if not r["final_return"] > f:
                failed.append(f"{fw} seed {r['seed']}: {f:.2f} -> {r['final_return']:.2f}")
    if missing:
        return f"no evaluation curve for {', '.join(missing)}; no verdict"
    if failed:
        return f"NOT met, not above the first evaluation: {'; '.join(failed)}"
    return f"met on all {seen} runs"


def verdicts(task: str, algorithm: str, s: dict, by_fw: dict[str, list[dict]]) -> list[str]:
    m, b = s["marlm"], s["benchmarl"]
    name = f"{task} {algorithm}"
    if set(m["seeds"]) != set(b["seeds"]) or m["steps"] != b["steps"]:
        return [f"{name}: the two sides ran different seeds or steps; no verdict"]
    ret_ok = m["mean"] >= b["min"]
    where = "above" if m["mean"] > b["max"] else "within" if ret_ok else "below"
    met = "met" if ret_ok else "NOT met"
    if m["min"] == m["max"] == b["min"] == b["max"]:  # e.g. no delivery on any seed
        met = f"met only trivially: every seed of both sides ended at {m['mean']:.2f}"
    wall_ok = m["wall"] <= b["wall"] / 3
    load = f"{min(m['load'][0], b['load'][0]):.1f}..{max(m['load'][1], b['load'][1]):.1f}"
    return [
        f"- {name}, (1) both sides improved over their first evaluation on every seed: "
        f"{improved(by_fw)}",
        f"- {name}, (2) marlm's mean final return {m['mean']:.2f} is {where} BenchMARL's seed range "
        f"{b['min']:.2f}..{b['max']:.2f} ({met})",
        f"- {name}, (3) wall time {m['wall']:.0f} s against {b['wall']:.0f} s, ratio "
        f"{m['wall'] / b['wall']:.2f} ({'met' if wall_ok else 'NOT met'}: the target is at most "
        f"0.33); CPU ratio {m['cpu'] / b['cpu']:.2f}; load average at the runs' ends {load}",
    ]


def table(rows: Rows) -> list[str]:
    out: list[str] = []
    for task, algorithm in sorted(rows):
        by_fw = rows[(task, algorithm)]
        s = {fw: summary(by_fw[fw]) for fw in FRAMEWORKS if by_fw.get(fw)}
        out += [HEADER, "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for fw in FRAMEWORKS:
            if fw not in s:
                out.append(f"| {task} | {algorithm} | {fw} | - | - | | (not run) |" + " |" * 6)
                continue
            x = s[fw]
            ratio_w = ratio_c = "1.00"
            if fw == "marlm" and "benchmarl" in s:
                ratio_w = f"{x['wall'] / s['benchmarl']['wall']:.2f}"
                ratio_c = f"{x['cpu'] / s['benchmarl']['cpu']:.2f}"
            elif fw == "marlm":
                ratio_w = ratio_c = "-"
            first = "-" if x["first"] is None else f"{x['first']:.2f}"
            out.append(
                f"| {task} | {algorithm} | {fw} | {'/'.join(map(str, x['steps']))} | "
                f"{','.join(map(str, x['seeds']))} | {first} | {x['mean']:.2f} | "
                f"{x['min']:.2f}..{x['max']:.2f}, {x['sd']:.2f} | {x['train']} | "
                f"{x['wall']:.0f} | {x['cpu']:.0f} | {ratio_w} | {ratio_c} |"
            )
        if algorithm == "mappo":
            for pub in PUBLISHED.get(task, []):
                value = "not read (see docs)" if pub["value"] is None else f"{pub['value']}"
                out.append(
                    f"| {task} | {algorithm} | published: {pub['source']} | {pub['budget']} | | "
                    f"| {value} | returns: {pub['returns']} |" + " |" * 5
                )
        out.append("")
        curve = curves(task, algorithm, by_fw)
        if curve:
            out += curve + [""]
        if "marlm" in s and "benchmarl" in s:
            out += verdicts(task, algorithm, s, by_fw)
        else:
            out.append(f"{task} {algorithm}: one side is missing; no verdict")
        out.append("")
    return out[:-1] if out else out


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
