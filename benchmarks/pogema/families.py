"""POGEMA's other lifelong families (random, mazes, movingai, puzzles): marlm beside the published.

Maps, settings and the published per-instance results are read from the POGEMA benchmark's own
repository (Skrynnik et al., "POGEMA: A Benchmark Platform for Cooperative Multi-Agent
Pathfinding", ICLR 2025; github.com/Cognitive-AI-Systems/pogema-benchmark): per family,
``algorithms/experiments/<family>/<family>-lmapf.yaml`` (map names, agent counts, seeds, episode
length, and the ``scenarios``: the starts and target sequences of the largest agent count),
``.../maps.yaml`` and ``raw_data_LMAPF/<family>/<Algorithm>.json`` (one throughput per map, seed
and agent count). ``--source`` is a git directory (default: the local mirror, or
``$MARLM_POGEMA_BENCHMARK``), a work tree, or a git URL, cloned (``--depth 1``) into
``$MARLM_CACHE/pogema-benchmark``.

Each episode is POGEMA 1.4.0's own instance (``harness.pogema_instance``: starts and every
agent's target sequence from POGEMA's generator), stepped in-process like ``evaluate.py``
(``evaluate.simulate_one``): ``marlm_hand`` (PIBT over the hand guidance), ``marlm`` (what ships:
a map's own learned weights, ``data/guidance-<map>.json``, from ``SHIPPED_MIN_DENSITY`` robots
per free cell up with ``SHIPPED_NARROW_PRIORITY``; else its family's setting,
``data/guidance-family-<family>.json`` from ``families_train.py``, at every density; else the
hand guidance) and ``free_flow`` (each agent alone on shortest paths: the bound). Checks, per instance: at the
scenario's agent count the generated starts and targets equal the benchmark's scenario, and no
published figure exceeds the free-flow bound (either would mean the instances differ).

Writes, for ``--out PREFIX`` (never over an existing file): ``PREFIX.jsonl`` (one row per family,
map, seed, agents, algorithm: the rows of ``evaluate.py`` plus ``family``, ``map_name``,
``learned_active``), ``PREFIX-published.json`` (the published per-instance throughputs of the
instances run, with the source and its commit) and ``PREFIX.md`` (a table per family).
``--report ROWS.jsonl`` rewrites only the tables from existing rows and extract.

Usage (POGEMA's venv, see ``run.sh``)::

    families.py --maps random=32,mazes=32,movingai=16,puzzles=16 --seeds-per-map 10 \
        --out docs/pogema/families
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
LEARNED = HERE / "data" / "guidance-wfi_warehouse.json"
"""The shipped learned guidance (``harness.LEARNED``; named here so that the readers of the
benchmark's files import without POGEMA, for the tests)."""


def weights_file(map_name: str) -> Path:
    """Where the learned guidance trained for ``map_name`` lives (``train.sh --copy-to``)."""
    return HERE / "data" / f"guidance-{map_name}.json"


FAMILIES = {"random": "01-random", "mazes": "02-mazes", "movingai": "04-movingai",
            "puzzles": "05-puzzles"}  # fmt: skip
"""``--families`` names and the benchmark's folder of each."""

MIRROR = Path("/work/.mirror/Cognitive-AI-Systems+pogema-benchmark/repo")
URL = "https://github.com/Cognitive-AI-Systems/pogema-benchmark"
OURS = ("marlm_hand", "marlm", "free_flow")
SETTING_KEYS = ("on_target", "collision_system", "observation_type", "max_episode_steps")


# ---- reading the benchmark repository -------------------------------------------------------


def parse_yaml_subset(text: str) -> dict:
    """The YAML of the benchmark's files: nested block mappings, scalars, flow sequences (one or
    several lines) and ``|-`` block scalars (the maps). POGEMA's venv has no YAML package.

    Raises:
        ValueError: a line that is not ``key: value`` at a mapping's indentation.
    """
    lines = text.splitlines()
    pos = 0

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip(" "))

    def skip_blank() -> None:
        nonlocal pos
        while pos < len(lines) and (not lines[pos].strip() or lines[pos].lstrip()[0] == "#"):
            pos += 1

    def block(level: int) -> dict:
        nonlocal pos
        out: dict = {}
        skip_blank()
        while pos < len(lines) and indent(lines[pos]) >= level:
            line = lines[pos]
            if indent(line) > level:
                raise ValueError(f"line {pos + 1}: unexpected indentation")
            key, sep, rest = line.strip().partition(":")
            if not sep:
                raise ValueError(f"line {pos + 1}: expected 'key: value', got {line.strip()!r}")
            key, rest = key.strip().strip("\"'"), rest.strip()
            pos += 1
            if rest in ("|", "|-"):
                body = []
                while pos < len(lines) and (not lines[pos].strip() or indent(lines[pos]) > level):
                    if lines[pos].strip():
                        body.append(lines[pos].strip())
                    pos += 1
                out[key] = "\n".join(body)
            elif rest.startswith("["):
                parts, depth = [rest], rest.count("[") - rest.count("]")
                while depth > 0:
                    parts.append(lines[pos].strip())
                    depth += parts[-1].count("[") - parts[-1].count("]")
                    pos += 1
                flow = " ".join(parts)
                out[key] = json.loads(re.sub(r"(?<![\w\"-])([A-Za-z_][\w.-]*)", r'"\1"', flow))
            elif rest:
                out[key] = _scalar(rest)
            else:
                skip_blank()
                deeper = pos < len(lines) and indent(lines[pos]) > level
                out[key] = block(indent(lines[pos])) if deeper else None
            skip_blank()
        return out

    return block(0)


def _scalar(text: str):
    text = text.strip().strip("\"'")
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Source:
    """Files of the benchmark repository: a git directory, a work tree, or a git URL (cloned).

    Raises:
        ValueError: ``where`` is none of these (message names ``--source`` and the fix).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.git_dir: Path | None = None
        self.root: Path | None = None
        if re.match(r"^(https?|ssh|git|file)://|^git@", where):
            cache = Path(os.environ.get("MARLM_CACHE", Path.home() / ".cache" / "marlm"))
            dest = cache / "pogema-benchmark"
            if not dest.exists():
                try:
                    subprocess.run(["git", "clone", "--depth", "1", where, str(dest)], check=True)
                except (subprocess.CalledProcessError, OSError) as e:
                    raise ValueError(f"cannot clone {where} into {dest} ({e})") from e
            self.root = dest
        elif (Path(where) / "HEAD").is_file() and (Path(where) / "objects").is_dir():
            self.git_dir = Path(where)
        elif (Path(where) / "raw_data_LMAPF").is_dir():
            self.root = Path(where)
        else:
            raise ValueError(
                f"{where} is not a clone, a git directory or a URL of pogema-benchmark"
            )

    def read(self, path: str) -> str:
        """The text of ``path`` (relative to the repository's top) at HEAD."""
        if self.git_dir is not None:
            return self._git("show", f"HEAD:{path}")
        return (self.root / path).read_text(encoding="utf-8")

    def names(self, folder: str) -> list[str]:
        """File names directly under ``folder``."""
        if self.git_dir is not None:
            return sorted(self._git("ls-tree", "--name-only", f"HEAD:{folder}").split())
        return sorted(p.name for p in (self.root / folder).iterdir() if p.is_file())

    def commit(self) -> str:
        """HEAD's commit hash, or ``"unknown"`` (a work tree that is not a git repository)."""
        try:
            return self._git("rev-parse", "HEAD").strip()
        except (subprocess.CalledProcessError, OSError):
            return "unknown"

    def _git(self, *args: str) -> str:
        where = ["--git-dir", str(self.git_dir)] if self.git_dir else ["-C", str(self.root)]
        return subprocess.run(["git", *where, *args], check=True, capture_output=True,
                               text=True).stdout  # fmt: skip


def family_setting(source: Source, family: str) -> dict:
    """``{"maps": {name: text}, "map_names": [...], "agents": [...], "seeds": [...],
    "max_episode_steps", "on_target", ..., "scenarios": {(map, seed): (agents_xy, targets_xy)}}``
    of one family, from its experiment configuration."""
    folder = FAMILIES[family]
    exp = parse_yaml_subset(source.read(f"algorithms/experiments/{folder}/{folder}-lmapf.yaml"))
    env = exp["environment"]

    def grid(value):
        return value["grid_search"] if isinstance(value, dict) else [value]

    setting = {k: env[k] for k in SETTING_KEYS}
    setting["map_names"] = grid(env["map_name"])
    setting["agents"] = grid(env["num_agents"])
    setting["seeds"] = grid(env["seed"])
    setting["maps"] = parse_yaml_subset(source.read(f"algorithms/experiments/{folder}/maps.yaml"))
    setting["scenarios"] = {
        (s["map_name"], s["seed"]): (s["agents_xy"], s["targets_xy"])
        for s in (exp.get("scenarios") or {}).values()
    }
    return setting


def published(source: Source, family: str) -> dict:
    """``{algorithm: {num_agents: {(map_name, seed): avg_throughput}}}`` of one family."""
    folder = f"raw_data_LMAPF/{FAMILIES[family]}"
    out: dict = {}
    for name in source.names(folder):
        if not name.endswith(".json"):
            continue
        for row in json.loads(source.read(f"{folder}/{name}")):
            key = row["env_grid_search"]
            per_n = out.setdefault(row["algorithm"], {}).setdefault(int(key["num_agents"]), {})
            per_n[(key["map_name"], int(key.get("seed", 0)))] = row["metrics"]["avg_throughput"]
    return out


def spread_pick(items: list, k: int) -> list:
    """``k`` of ``items`` spread evenly (every ``len / k``-th, from the first); all if k >= len."""
    if k >= len(items):
        return list(items)
    return [items[(i * len(items)) // k] for i in range(k)]


# ---- running ------------------------------------------------------------------------------------


def grid_config(setting: dict, map_name: str, num_agents: int, seed: int):
    """POGEMA's ``GridConfig`` of one instance of a family (the benchmark's setting)."""
    from pogema import GridConfig

    return GridConfig(
        map=setting["maps"][map_name],
        map_name=map_name,
        num_agents=num_agents,
        seed=seed,
        on_target=setting["on_target"],
        max_episode_steps=setting["max_episode_steps"],
        collision_system=setting["collision_system"],
        observation_type=setting["observation_type"],
        obs_radius=5,  # POGEMA's default; the benchmark sets none
    )


def scenario_matches(instance, scenario) -> bool:
    """True when ``instance``'s starts and targets equal the benchmark's scenario (its target
    sequences may be shorter than POGEMA's: compared on the scenario's length)."""
    starts, targets = scenario
    if instance.starts.tolist() != starts:
        return False
    for i, seq in enumerate(targets):
        mine = [t for t in instance.targets[i].tolist() if t[0] >= 0]
        if mine[: len(seq)] != seq:
            return False
    return True


def run_family(family: str, setting: dict, maps: list, seeds: list, args, params_of, fh) -> int:
    """Run every selected instance of ``family``; write rows to ``fh``. ``params_of(map_name)``:
    what ``marlm`` uses on that map: learned weights (``float64[N_PARAMS]``, from
    ``SHIPPED_MIN_DENSITY`` up with the passage priority), a family's ``Guidance``
    (``families_scheme.read_family``, at every density) or None (the hand guidance). Returns
    checks failed (instances unlike the benchmark's scenario; with ``--check-pogema K``, rows of
    the first K maps at the family's largest agent count that differ when POGEMA itself steps
    the episode)."""
    from evaluate import simulate_one
    from harness import pogema_instance, run_one

    from marlm.hybrid.acting.learned_guidance import SHIPPED_MIN_DENSITY

    failed = 0
    for k, map_name in enumerate(maps):
        for seed in seeds:
            for n in setting["agents"]:
                gc = grid_config(setting, map_name, n, seed)
                instance, target_cells = pogema_instance(n, seed, gc)
                scenario = setting["scenarios"].get((map_name, seed))
                match = None
                if scenario is not None and len(scenario[0]) == n:
                    match = scenario_matches(instance, scenario)
                    failed += not match
                params = params_of(map_name)
                scheme = params if hasattr(params, "mover") else None  # a family's Guidance
                active = scheme is not None or (
                    params is not None and n >= SHIPPED_MIN_DENSITY * instance.free.sum()
                )
                check = k < args.check_pogema and n == max(setting["agents"])
                for algorithm in args.algorithms:
                    if algorithm == "marlm" and scheme is not None:
                        row = simulate_scheme(algorithm, instance, target_cells, scheme)
                    else:
                        row = simulate_one(algorithm, instance, target_cells, params, args.penalty)
                    row.update(family=family, map_name=map_name)
                    if check and algorithm != "free_flow":
                        if algorithm == "marlm" and scheme is not None:
                            ref = pogema_run(gc, seed, scheme.mover(
                                instance.free, n, seed, target_cells))  # fmt: skip
                        else:
                            ref = run_one(algorithm, n, seed, args.penalty, True, params, gc)
                        row["pogema_throughput"] = ref["avg_throughput"]
                        row["pogema_reverted_moves"] = ref["reverted_moves"]
                        failed += ref["avg_throughput"] != row["avg_throughput"]
                        failed += ref["reverted_moves"] != 0
                    if algorithm == "marlm":
                        row["learned_active"] = bool(active)
                    if match is not None:
                        row["scenario_match"] = match
                    line = json.dumps(row)
                    fh.write(line + "\n")
                    fh.flush()
                    print(line, flush=True)
    return failed


def simulate_scheme(algorithm: str, instance, target_cells, guidance) -> dict:
    """``evaluate.simulate_one``'s row of ``guidance`` (any object with its ``mover``) on
    ``instance``, stepped in-process."""
    import time

    from marlm.hybrid.simulator import simulate

    c0, t0 = time.process_time(), time.perf_counter()
    value = simulate(instance, guidance, target_cells)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    steps = instance.steps
    return {"algorithm": algorithm, "num_agents": len(instance.starts), "seed": instance.seed,
            "avg_throughput": float(value), "reverted_moves": 0,
            "ms_per_step": 1000.0 * wall / steps, "cpu_ms_per_step": 1000.0 * cpu / steps,
            "steps": steps, "engine": "in-process"}  # fmt: skip


def pogema_run(gc, seed: int, policy) -> dict:
    """``{"avg_throughput", "reverted_moves"}`` of ``policy`` (``act(positions, targets)``)
    stepped by POGEMA itself on the instance of ``gc`` (as ``harness.run_one``)."""
    from pogema import GridConfig, pogema_v0

    env = pogema_v0(grid_config=gc)
    env.reset(seed=seed)
    u, moves, reverted = env.unwrapped, np.array(GridConfig().MOVES), 0
    while True:
        positions = np.array(u.get_agents_xy(ignore_borders=True), dtype=np.int64)
        targets = np.array(u.get_targets_xy(ignore_borders=True), dtype=np.int64)
        actions = policy.act(positions, targets)
        _, _, terminated, truncated, infos = env.step(actions.tolist())
        after = np.array(u.get_agents_xy(ignore_borders=True), dtype=np.int64)
        reverted += int(((actions != 0) & (after != positions + moves[actions]).any(axis=1)).sum())
        if all(terminated) or all(truncated):
            return {"avg_throughput": float(infos[0]["metrics"]["avg_throughput"]),
                    "reverted_moves": reverted}  # fmt: skip


# ---- report -----------------------------------------------------------------------------------


def build_extract(source: Source, rows: list[dict]) -> dict:
    """The published throughputs of the instances in ``rows``, per family: ``{"setting": ...,
    "instances": {n: ["map@seed", ...]}, "per_instance": {algorithm: {n: [value or None, ...]}}}``
    (lists aligned with ``instances``; None: not published on that instance)."""
    out = {"source": f"{URL} (POGEMA benchmark, Skrynnik et al., ICLR 2025), "
           "raw_data_LMAPF/<family>/<Algorithm>.json", "commit": source.commit(),
           "metric": "avg_throughput: targets reached per step", "families": {}}  # fmt: skip
    for family in FAMILIES:
        mine = [r for r in rows if r["family"] == family]
        if not mine:
            continue
        setting = family_setting(source, family)
        keys: dict[int, list] = {}
        for r in mine:
            k = f"{r['map_name']}@{r['seed']}"
            if k not in keys.setdefault(r["num_agents"], []):
                keys[r["num_agents"]].append(k)
        info = {"setting": {k: setting[k] for k in SETTING_KEYS}}
        info["setting"].update(
            agents=setting["agents"],
            maps_total=len(setting["map_names"]),
            maps_run=len({r["map_name"] for r in mine}),
            seeds_run=sorted({r["seed"] for r in mine}),
        )
        info["instances"] = {str(n): ks for n, ks in sorted(keys.items())}
        info["per_instance"] = {}
        for alg, per_n in sorted(published(source, family).items()):
            info["per_instance"][alg] = {
                str(n): [per_n.get(n, {}).get((k.rsplit("@", 1)[0], int(k.rsplit("@", 1)[1])))
                         for k in ks]
                for n, ks in sorted(keys.items())
            }  # fmt: skip
        out["families"][family] = info
    return out


def comparable(values: list, steps: int) -> str:
    """Why published ``values`` cannot be set beside an episode of ``steps`` steps, or ``""``.

    A throughput of a ``steps``-step episode is a multiple of ``1 / steps``; one that is not was
    measured on episodes of another length (on mazes, Follower's and MATS-LP's are multiples of
    1 / 256 where the setting says 128 steps)."""
    if any(v is None for v in values):
        return "not published on every instance run"
    if any(abs(v * steps - round(v * steps)) > 1e-6 for v in values):
        return f"measured on episodes longer than {steps} steps"
    return ""


def family_table(family: str, rows: list[dict], info: dict) -> tuple[list[str], list[str]]:
    """Markdown lines of one family's table (and the notes below it), and the failed checks."""
    by: dict = {}
    for r in rows:
        if r["family"] == family:
            key = f"{r['map_name']}@{r['seed']}"
            by.setdefault(r["algorithm"], {}).setdefault(r["num_agents"], {})[key] = r
    steps = info["setting"]["max_episode_steps"]
    agents = sorted({n for per_n in by.values() for n in per_n})
    head = ("| agents | instances | marlm_hand | marlm (shipped) | learned active | free-flow bound "
            "| best published (same instances) | marlm / best | marlm vs hand: won / tied / lost |")  # fmt: skip
    lines, problems, excluded = [head, "|" + "---|" * 9], [], {}
    for n in agents:
        keys = [k for k in info["instances"][str(n)] if all(k in by[a][n] for a in OURS)]
        hand, ship, bound = (np.array([by[a][n][k]["avg_throughput"] for k in keys]) for a in OURS)
        active = sum(by["marlm"][n][k].get("learned_active", False) for k in keys)
        best_alg, best = "-", float("nan")
        for alg, values in info["per_instance"].items():
            vals = [values[str(n)][info["instances"][str(n)].index(k)] for k in keys]
            why = comparable(vals, steps)
            if why:
                excluded.setdefault(alg, why)
                continue
            vals = np.array(vals, dtype=float)
            over = int((vals > bound + 1e-9).sum())
            if over:
                problems.append(f"{family}, {n} agents: {alg} above the bound on {over} instances")
            if not vals.mean() <= best:
                best_alg, best = alg, float(vals.mean())
        won, tied = int((ship > hand).sum()), int((ship == hand).sum())
        lines.append(
            f"| {n} | {len(keys)} | {hand.mean():.3f} ± {hand.std():.3f} "
            f"| {ship.mean():.3f} ± {ship.std():.3f} | {active}/{len(keys)} "
            f"| {bound.mean():.3f} | {best:.3f} {best_alg} | {ship.mean() / best:.2f} "
            f"| {won} / {tied} / {len(keys) - won - tied} |"
        )
    for alg, why in sorted(excluded.items()):
        lines.append(f"\nNot compared: {alg} ({why}).")
    return lines, problems


def write_report(rows: list[dict], extract_all: dict, md: Path) -> list[str]:
    """Write the tables of ``rows`` beside the published extract to ``md``; returns the failed
    checks (published above the bound, instances unlike the benchmark's scenarios)."""
    out = [f"Published: {extract_all['source']}, commit {extract_all['commit']}.", ""]
    problems = []
    for family, info in extract_all["families"].items():
        s = info["setting"]
        lines, bad = family_table(family, rows, info)
        problems += bad
        mine = [r for r in rows if r["family"] == family and "scenario_match" in r]
        differ = [r for r in mine if not r["scenario_match"]]
        stepped = [r for r in rows if r["family"] == family and "pogema_throughput" in r]
        unlike = [r for r in stepped if r["pogema_throughput"] != r["avg_throughput"]]
        problems += [f"{family}: {r['map_name']} seed {r['seed']} differs from the benchmark's "
                     "scenario" for r in differ]  # fmt: skip
        seeds = ",".join(map(str, s["seeds_run"]))
        out += [
            f"### {family} ({FAMILIES[family]}: {s['max_episode_steps']} steps, {s['maps_run']} "
            f"of {s['maps_total']} maps, seeds {seeds})",
            "",
            *lines,
            "",
            f"Checks: rows whose instance equals the benchmark's scenario {len(mine) - len(differ)}"
            f" of {len(mine)}; agent counts with a published figure above the free-flow bound "
            f"{len(bad)}"
            + (
                f"; rows also stepped by POGEMA itself, the same throughput: "
                f"{len(stepped) - len(unlike)} of {len(stepped)}."
                if stepped
                else "."
            ),
            "",
        ]
    md.write_text("\n".join(out))
    print("\n".join(out))
    return problems


def parse_counts(text: str) -> dict[str, int]:
    """``"random=32,movingai=16"`` -> ``{"random": 32, "movingai": 16}``.

    Raises:
        ValueError: an item that is not ``FAMILY=K`` with K >= 1 and a known family.
    """
    counts = {}
    for item in filter(None, text.split(",")):
        name, _, k = item.strip().partition("=")
        if name not in FAMILIES or not k.isdigit() or int(k) < 1:
            raise ValueError(f"{item!r}: write FAMILY=K, FAMILY one of {', '.join(FAMILIES)}")
        counts[name] = int(k)
    return counts


def finish(source: Source, rows_file: Path) -> int:
    """Write ``-published.json`` and ``.md`` beside ``rows_file``; 1 if a check failed."""
    rows = [json.loads(ln) for ln in rows_file.read_text().splitlines() if ln.strip()]
    stem = str(rows_file.with_suffix(""))
    extract_all = build_extract(source, rows)
    Path(stem + "-published.json").write_text(json.dumps(extract_all, separators=(",", ":")))
    problems = write_report(rows, extract_all, Path(stem + ".md"))
    for p in problems:
        print(f"marlm: error: {p}", file=sys.stderr)
    return 1 if problems else 0


def fail(field: str, message: str) -> int:
    """``harness.fail``'s one clear line (exit status 2), without importing POGEMA."""
    print(f"marlm: error: {field}: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=os.environ.get("MARLM_POGEMA_BENCHMARK", str(MIRROR)),
                    help=f"pogema-benchmark: git directory, clone or URL (e.g. {URL})")  # fmt: skip
    ap.add_argument("--families", default=",".join(FAMILIES), help=", ".join(FAMILIES))
    ap.add_argument("--maps", default="", metavar="FAMILY=K,...",
                    help="maps run per family, spread evenly over its list (default: all)")  # fmt: skip
    ap.add_argument("--seeds-per-map", type=int, default=0, metavar="S",
                    help="the first S of a family's seeds (default: all)")  # fmt: skip
    ap.add_argument("--check-pogema", type=int, default=0, metavar="K",
                    help="also step the first K maps of each family in POGEMA at its "
                         "largest agent count; exit 1 on any difference")  # fmt: skip
    ap.add_argument("--penalty", type=int, default=2, help="the hand rule's penalty")
    ap.add_argument("--guidance", default=None,
                    help="learned weights (a result.json) for marlm on every map, a transfer "
                         "test; default: what ships, each map's own data/guidance-<map>.json, "
                         "else its family's data/guidance-family-<family>.json, else the hand "
                         "guidance")  # fmt: skip
    ap.add_argument("--report", metavar="ROWS",
                    help="only write the extract and tables of an existing ROWS.jsonl")  # fmt: skip
    ap.add_argument("--out", metavar="PREFIX", help="writes PREFIX.jsonl, -published.json, .md")
    args = ap.parse_args(argv)
    base = args.report[: -len(".jsonl")] if args.report else args.out
    if not base or (args.report and not args.report.endswith(".jsonl")):
        return fail("--out", "give a file prefix, e.g. --out families (or --report ROWS.jsonl)")
    suffixes = ("-published.json", ".md") if args.report else (".jsonl", "-published.json", ".md")
    for p in (Path(base + s) for s in suffixes):
        if p.exists():
            return fail("--out", f"{p} exists; choose a new prefix (or remove the file)")
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    for f in families:
        if f not in FAMILIES:
            return fail("--families", f"unknown {f!r}; choose from {', '.join(FAMILIES)}")
    if args.seeds_per_map < 0 or args.check_pogema < 0:
        field = "--seeds-per-map" if args.seeds_per_map < 0 else "--check-pogema"
        return fail(field, "must be at least 0 (0 = every seed / no check)")
    try:
        counts = parse_counts(args.maps)
    except ValueError as e:
        return fail("--maps", str(e))
    try:
        source = Source(args.source)
    except ValueError as e:
        return fail("--source", f"{e}; give the path of a clone or {URL}")
    if args.report:
        return finish(source, Path(args.report))
    from load_marlm import load_pibt

    load_pibt()
    from marlm.hybrid.acting.learned_guidance import params_from

    plans = {}
    for family in families:
        setting = family_setting(source, family)
        expected = {"on_target": "restart", "collision_system": "soft"}
        for key, value in expected.items():
            if setting[key] != value:
                return fail("--families", f"{family}: {key} is {setting[key]!r}, not {value!r}")
        maps = spread_pick(setting["map_names"], counts.get(family, len(setting["map_names"])))
        seeds = setting["seeds"][: args.seeds_per_map or None]
        plans[family] = (setting, maps, seeds)

    from families_scheme import family_file, read_family, shipped_scheme, window_settings

    def read(path: Path):
        return params_from(json.loads(path.read_text()))  # by name, as evaluate.py

    try:
        given = None if args.guidance is None else read(Path(args.guidance))
        own = {m: read(weights_file(m)) for _, ms, _ in plans.values() for m in ms
               if weights_file(m).is_file()}  # fmt: skip
        per_family = {f: read_family(family_file(f)) for f in plans if family_file(f).is_file()}
        windows = window_settings()
        per_family = {f: shipped_scheme(f, per_family.get(f), windows) for f in plans}
    except (OSError, ValueError, KeyError) as e:
        return fail("--guidance", f"cannot read learned weights ({e})")
    family_of = {m: f for f, (_, ms, _) in plans.items() for m in ms}

    def params_of(map_name: str):
        if args.guidance is not None:
            return given
        return own.get(map_name, per_family.get(family_of[map_name]))

    args.algorithms = OURS
    failed = 0
    rows_file = Path(base + ".jsonl")
    with rows_file.open("w") as fh:
        for family, (setting, maps, seeds) in plans.items():
            failed += run_family(family, setting, maps, seeds, args, params_of, fh)
    if failed:
        print(f"marlm: error: {failed} instances or rows differ from the benchmark's scenarios "
              "or from POGEMA's own stepping (rows: scenario_match, pogema_throughput)",
              file=sys.stderr)  # fmt: skip
    return max(finish(source, rows_file), int(failed > 0))


if __name__ == "__main__":
    raise SystemExit(main())
