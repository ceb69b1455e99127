"""Detectors for the known failure modes of multi-agent learners: the checklist, in code.

- :func:`detect_lazy_agent`: the team return rises while one agent's own contribution stays near
  zero, or its actions collapse to one repeated action, or to one repeated action sequence that
  achieves nothing (Sunehag et al. 2018, "Value-Decomposition
  Networks for Cooperative Multi-Agent Learning", section 1: the lazy agent). Fix: give agents
  their own sub-rewards (credit assignment: individual or difference rewards).
- :func:`detect_non_stationarity`: an agent's return oscillates when all agents learn together but
  not when it learns alone against a fixed partner (Hernandez-Leal et al. 2017, "A Survey of
  Learning in Multiagent Environments: Dealing with Non-Stationarity"). Fix: centralised training
  that conditions on the partner's action (CTDE: ``--learner jal``), or individual rewards.

  Measured on GridRace (seeds 0-7, 20000 episodes, alpha 0.2, constant epsilon 0.2, so learning
  never stops): IQL on the shared reward fires in 6 of 8 seeds (oscillation together 0.03-0.26,
  alone 0.02-0.03: the two agents keep swapping who runs to the goal, in blocks of a few hundred
  episodes; alone against a frozen partner the roles stay put); JAL on the shared reward fires in
  0 of 8, IQL on individual or difference rewards in 0 of 8. VDN on the shared reward fires in 7
  of 8
  (the roles swap as with IQL), so VDN is not suggested. With the seed note's IQL setting (epsilon
  decaying to 0.02 by episode ~4000) the second half of the run has settled and the detector does
  not fire for IQL (seeds 0-3, shared, individual and difference rewards: oscillation <= 0.014
  together and alone).

The detectors read per-episode arrays only; :func:`diagnose_run` reads them from a run folder
(``episodes.npz``, ``metrics.json``, optional ``fixed_partner.npz``) written by ``marlm train``.
A training run writes its findings to ``findings.json`` (one :meth:`Finding.to_dict` each,
:mod:`marlm.eval.runs`); ``marlm report`` shows that file. Demo runs have no detectors here.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what (``kind``), who (``agent``), the evidence, and what to do."""

    kind: str
    agent: str | None
    message: str
    suggestion: str
    evidence: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        who = f" [{self.agent}]" if self.agent else ""
        return f"{self.kind}{who}: {self.message}. Suggestion: {self.suggestion}"


def detect_goal_not_reached(
    greedy_path_length: int, max_steps: int, *, reward_source: str = "env"
) -> list[Finding]:
    """The learned greedy policy never reaches the goal within the time limit.

    With a learned or model-given reward this is the signature of reward hacking: the agent
    collects reward for something other than the task (Amodei et al. 2016, "Concrete Problems in
    AI Safety", section 4). Returns one finding, or none when the greedy path arrives.
    """
    if greedy_path_length < max_steps:
        return []
    hint = (
        "the LLM reward pays for states off the way to the goal: tighten its anchors, add a goal "
        "bonus from the environment, or train on --reward env"
        if reward_source == "llm"
        else "check the reward and train longer or explore more"
    )
    return [
        Finding(
            kind="goal_not_reached",
            agent=None,
            message=f"the greedy policy does not reach the goal within {max_steps} steps "
            f"(reward: {reward_source})",
            suggestion=hint,
            evidence={
                "greedy_path_length": float(greedy_path_length),
                "max_steps": float(max_steps),
            },
        )
    ]


def _window(n: int, window: int | None) -> int:
    return max(1, n // 10) if window is None else max(1, min(window, n))


#: The lazy-agent remedy in the options of ``marlm train race`` (the tabular learners).
RACE_REMEDY = (
    "give each agent its own sub-reward (--reward individual or --reward difference) so its "
    "own contribution is credited"
)
#: The same in the options of ``marlm train env`` (the network learners).
ENV_REMEDY = (
    "give each agent its own reward in the environment (its own part of the team's, or a "
    "difference reward: the team's with and without it), so its own contribution is credited"
)


def detect_lazy_agent(
    team_return: np.ndarray,
    own_return: np.ndarray,
    agents: Sequence[str],
    *,
    reached: np.ndarray | None = None,
    action_counts: np.ndarray | None = None,
    action_sequences: np.ndarray | None = None,
    window: int | None = None,
    min_rise: float = 0.05,
    max_share: float = 0.1,
    max_action_share: float = 0.9,
    min_sequence_share: float = 0.75,
    remedy: str = RACE_REMEDY,
) -> list[Finding]:
    """Name each agent that lets the others do the work while the team return rises.

    Args:
        team_return: ``float64[E]`` team return per episode.
        own_return: ``float64[E, N]`` each agent's own (individual) return per episode.
        agents: the N agent names.
        reached: ``bool[E, N]`` whether each agent achieved the task (GridRace: reached the goal);
            if given, an agent's contribution is its share of the team's achievements.
        action_counts: ``int64[E, N, A]`` actions taken per episode, for the collapse check.
        action_sequences: ``int[E, N, T]`` the action of each agent at each step, -1 after its
            last step, for the repeated-sequence check: an agent whose most frequent episode-long
            action sequence fills more than ``min_sequence_share`` of the last window's episodes,
            and achieves nothing in them (reached the goal in fewer than ``max_share`` of them with
            ``reached``, else an own return <= 0), has collapsed. A converged agent also repeats
            its best path; that is not laziness, hence the "achieves nothing" condition.
            Measured on GridRace (IQL, 30000 episodes, seeds 0-7, last 3000 episodes): the
            agent that runs to the goal repeats one path in 27-89% of the episodes and arrives in
            all of them; the lazy agent of shared rewards wanders (its most frequent sequence
            fills 10-54%), so there the arrival share, not the sequence, names it.
        window: episodes compared at the start and the end (default: a tenth of E).
        min_rise: the team return must rise by at least this much from the first to the last window.
        max_share: an agent with a smaller share of the achievements (or of the absolute own
            return, without ``reached``) in the last window is lazy.
        max_action_share: an agent whose most frequent action exceeds this share is collapsed,
            and lazy unless its own return shows it contributes: where the agents' own returns
            differ in some episode (individual rewards) and its share of their absolute sum in the last window is
            at least ``max_share``, it repeats an action that pays (a converged policy whose best
            action is the same every step), which is not laziness. Under a shared reward every
            own return is the team's, so collapse alone names the agent.

    Returns:
        One finding per lazy agent (empty if the team return did not rise or all contribute).
    """
    team = np.asarray(team_return, dtype=np.float64)
    own = np.asarray(own_return, dtype=np.float64)
    n = team.shape[0]
    w = _window(n, window)
    first, last = float(team[:w].mean()), float(team[n - w :].mean())
    if n < 2 or last - first < min_rise:
        return []
    if reached is not None:
        contrib = np.asarray(reached, dtype=np.float64)[n - w :].mean(axis=0)
        unit = "of the goal arrivals"
    else:
        contrib = np.abs(own[n - w :]).mean(axis=0)
        unit = "of the absolute own return"
    total = float(contrib.sum())
    own_contrib = np.abs(own[n - w :]).mean(axis=0)
    # Own returns tell agents apart where they differ in some episode of the run (individual
    # rewards): agents that all earn the same by the end still differed while they learned.
    own_informative = bool(np.ptp(own, axis=1).max() > 1e-12) if own.size else False
    findings = []
    for i, agent in enumerate(agents):
        share = float(contrib[i] / total) if total > 0 else 0.0
        action_share = 0.0
        if action_counts is not None:
            counts = np.asarray(action_counts)[n - w :, i].sum(axis=0)
            action_share = float(counts.max() / max(counts.sum(), 1))
        sequence: tuple[int, ...] = ()
        sequence_share = 0.0
        if action_sequences is not None:
            sequence, sequence_share, rows = dominant_sequence(
                np.asarray(action_sequences)[n - w :, i]
            )
            if sequence_share > min_sequence_share:
                if reached is not None:
                    achieved = np.asarray(reached)[n - w :, i][rows].mean() >= max_share
                else:
                    achieved = own[n - w :, i][rows].mean() > 0.0
                sequence_share = 0.0 if achieved else sequence_share
        low = share < max_share
        collapsed = action_share > max_action_share
        if collapsed and own_informative:
            own_share = float(own_contrib[i] / own_contrib.sum()) if own_contrib.sum() > 0 else 0.0
            collapsed = own_share < max_share
        repeated = sequence_share > min_sequence_share
        if not (low or collapsed or repeated):
            continue
        if low:
            reason = f"makes {share:.0%} {unit} in the last {w} episodes"
        elif collapsed:
            reason = f"repeats one action {action_share:.0%} of the time in the last {w} episodes"
        else:
            reason = (
                f"repeats one action sequence {list(sequence)} in {sequence_share:.0%} of the last "
                f"{w} episodes without achieving anything in them"
            )
        findings.append(
            Finding(
                kind="lazy_agent",
                agent=agent,
                message=f"{agent} {reason} while the team return rose from {first:.2f} to {last:.2f}",
                suggestion=remedy,
                evidence={
                    "team_return_first": first,
                    "team_return_last": last,
                    "contribution_share": share,
                    "own_return_last": float(own[n - w :, i].mean()),
                    "top_action_share": action_share,
                    "top_sequence_share": sequence_share,
                },
            )
        )
    return findings


def dominant_sequence(sequences: np.ndarray) -> tuple[tuple[int, ...], float, np.ndarray]:
    """The most frequent action sequence among episodes, its share, and where it occurs.

    Args:
        sequences: ``int[E, T]`` one agent's action at each step of E episodes, -1 after its last
            step (trailing -1 are ignored; an episode without actions counts as the empty sequence).

    Returns:
        ``(sequence, share, rows)``: the sequence as a tuple of actions (ties: the lexicographically smallest), the
        fraction of the E episodes that are exactly it, and ``bool[E]`` marking them.
    """
    seq = np.asarray(sequences)
    n = seq.shape[0]
    if n == 0:
        return (), 0.0, np.zeros(0, dtype=bool)
    if seq.shape[1] == 0:  # no steps at all: every episode is the empty sequence
        return (), 1.0, np.ones(n, dtype=bool)
    # Rows in lexicographic order (np.lexsort's last key is the primary one), then runs of equal
    # rows: the first longest run is the most frequent sequence, the smallest one on ties. The
    # same answer as np.unique(seq, axis=0, return_counts=True), which sorts the rows as
    # structured records, about 50 times slower on 3000 episodes of 50 steps.
    ordered = seq[np.lexsort(seq.T[::-1])]
    starts = np.flatnonzero(np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)])
    counts = np.diff(np.r_[starts, n])
    best = int(np.argmax(counts))
    row = ordered[starts[best]]
    where = (seq == row).all(axis=1)
    return tuple(int(a) for a in row if a >= 0), float(counts[best] / n), where


def oscillation(returns: np.ndarray, block: int | None = None) -> float:
    """How much a return curve swings late in training: the standard deviation of the block means
    (blocks of ``block`` episodes, default E/50) over the second half of ``returns float64[E]``."""
    x = np.asarray(returns, dtype=np.float64)
    half = x[x.shape[0] // 2 :]
    b = block or max(1, x.shape[0] // 50)
    k = half.shape[0] // b
    if k < 2:
        return 0.0
    return float(half[: k * b].reshape(k, b).mean(axis=1).std())


def detect_non_stationarity(
    joint_return: np.ndarray,
    alone_return: dict[str, np.ndarray],
    agents: Sequence[str],
    *,
    ratio: float = 2.0,
    min_oscillation: float = 0.02,
) -> list[Finding]:
    """Name each agent whose return oscillates together but not alone against a fixed partner.

    Args:
        joint_return: ``float64[E, N]`` per-agent returns when all agents learn together.
        alone_return: ``{agent: float64[E]}`` the agent's returns when it learns alone against its
            partners frozen (a stationary environment).
        ratio: the joint oscillation must exceed ``ratio`` times the alone one.
        min_oscillation: and be at least this large (in return units).
    """
    joint = np.asarray(joint_return, dtype=np.float64)
    findings = []
    for i, agent in enumerate(agents):
        if agent not in alone_return:
            continue
        together = oscillation(joint[:, i])
        alone = oscillation(alone_return[agent])
        if together >= min_oscillation and together > ratio * alone:
            findings.append(
                Finding(
                    kind="non_stationarity",
                    agent=agent,
                    message=f"{agent}'s return oscillates {together:.3f} when learning together "
                    f"but {alone:.3f} alone against a fixed partner",
                    suggestion="the partners' learning moves its target: use centralised training "
                    "that conditions on the partner's action (--learner jal) or individual "
                    "rewards (--reward individual)",
                    evidence={"oscillation_together": together, "oscillation_alone": alone},
                )
            )
    return findings


def _gridworld_findings(metrics: dict) -> list[Finding]:
    """The detector of a GridWorld run (:func:`detect_goal_not_reached`), from its
    ``metrics.json``: the greedy path length, the episode's time limit (``config.max_steps``)
    and the reward's source (``llm`` when the metrics count the model's reward states), the
    same inputs :func:`marlm.experiments.tabular.run_gridworld` gave it when the run ended."""
    found = metrics.get("config")
    config = found if isinstance(found, dict) else {}
    length, limit = metrics.get("greedy_path_length"), config.get("max_steps")
    if not isinstance(length, int) or not isinstance(limit, int):
        return []
    source = "llm" if "reward/distinct_states" in metrics else "env"
    return detect_goal_not_reached(length, limit, reward_source=source)


#: The JSON name of a decoded value's type, for the messages of :func:`check_run_metrics`.
_JSON_TYPE = {dict: "object", list: "array", str: "string", int: "number", float: "number",
              bool: "true/false", type(None): "null"}  # fmt: skip


def _got(holder: dict, key: str) -> str:
    """What ``holder`` has at ``key``, for a message: ``is missing`` or ``is <value>``."""
    return "is missing" if key not in holder else f"is {json.dumps(holder[key])[:60]}"


def check_run_metrics(metrics: Any, episodes: dict[str, np.ndarray], path: Path) -> None:
    """Refuse a ``metrics.json`` (``metrics``, read from ``path``) or ``episodes.npz``
    (``episodes``) without the fields :func:`diagnose_run` reads, naming the file, the field and
    what is wrong, rather than diagnose it as nothing: ``metrics`` is an object with ``env`` (a
    string); a GridWorld run's (``env`` ``gridworld_v0``) holds ``greedy_path_length`` and
    ``config.max_steps`` (whole numbers); another run's ``episodes.npz`` holds ``own_return``
    (``float[episodes, agents]``) and ``team_return``, and its ``agents``, when given, name
    one agent per column of ``own_return``.

    Raises:
        InputError: naming ``path`` (or the ``episodes.npz`` beside it) and the field.
    """

    def refuse(field: str, what: str, source: Path = path) -> None:
        raise InputError(
            f"{what}: not the {source.name} marlm train writes; give the --out folder of a marlm "
            "train gridworld, race or env run",
            source=source,
            field=field,
        )

    if not isinstance(metrics, dict):
        refuse("metrics", f"holds a JSON {_JSON_TYPE.get(type(metrics), 'value')}, not an object")
    if not isinstance(metrics.get("env"), str):
        refuse("env", f"{_got(metrics, 'env')}; a training run names its environment here")
    if metrics["env"] == "gridworld_v0":
        config = metrics.get("config") if isinstance(metrics.get("config"), dict) else {}
        for field, holder, key in (
            ("greedy_path_length", metrics, "greedy_path_length"),
            ("config.max_steps", config, "max_steps"),
        ):
            value = holder.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                refuse(field, f"{_got(holder, key)}, not a whole number (the detector reads it)")
        return
    npz = path.with_name("episodes.npz")
    for key in ("own_return", "team_return"):
        if key not in episodes:
            refuse(key, "is missing (the multi-agent detectors read it)", npz)
    own = episodes["own_return"]
    if own.ndim != 2:
        refuse("own_return", f"has shape {own.shape}, not (episodes, agents)", npz)
    agents = metrics.get("agents")
    if agents is not None and (not isinstance(agents, list) or len(agents) != own.shape[1]):
        refuse("agents", f"{_got(metrics, 'agents')}, not the {own.shape[1]} agents of own_return")


def diagnose_run(folder: str | Path) -> list[Finding]:
    """Re-read a run folder written by ``marlm train`` and run the detectors that apply: on a
    GridWorld run :func:`detect_goal_not_reached`, on a GridRace run :func:`detect_lazy_agent`
    and (with ``fixed_partner.npz``) :func:`detect_non_stationarity`, as the run itself did.

    Raises:
        InputError: the folder or its ``episodes.npz`` / ``metrics.json`` is missing, unreadable
            or not what ``marlm train`` writes (:func:`check_run_metrics`).
    """
    folder = Path(folder)
    npz = folder / "episodes.npz"
    if npz.is_file() and not zipfile.is_zipfile(npz):  # numpy would call it pickled data
        raise InputError(
            "episodes.npz is not a NumPy .npz archive, so not the one marlm train writes; give "
            "the --out folder of a marlm train gridworld, race or env run",
            source=folder,
            field="RUN_FOLDER",
        )
    try:
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8-sig"))
        with np.load(folder / "episodes.npz") as data:
            episodes = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise InputError(
            f"not a marlm run folder (needs metrics.json and episodes.npz): {e}",
            source=folder,
            field="RUN_FOLDER",
        ) from e
    check_run_metrics(metrics, episodes, folder / "metrics.json")
    if metrics.get("env") == "gridworld_v0":
        return _gridworld_findings(metrics)
    if episodes["own_return"].shape[1] < 2:
        # single-agent run: nothing multi-agent to diagnose
        return []
    n_agents = episodes["own_return"].shape[1]
    # A deep run (marlm.eval.deep_runs) names its agents; the tabular race has agent_0, agent_1.
    agents = metrics.get("agents") or [f"agent_{i}" for i in range(n_agents)]
    deep = "learner" in metrics
    # A deep run logs goal arrivals only where the environment has them (its metrics then carry
    # reached_goal_rate); otherwise its reached column is all False, which reads as "nobody
    # arrived" (both agents of a healthy GridRace run were called lazy).
    logged = not deep or any(str(k).endswith("/reached_goal_rate") for k in metrics)
    findings = detect_lazy_agent(
        episodes["team_return"], episodes["own_return"], agents,
        reached=episodes.get("reached") if logged else None,
        action_counts=episodes.get("action_counts"),
        action_sequences=None if deep else episodes.get("actions"),
        # train race logs arrivals (its --reward options); train env does not (--individual-reward)
        remedy=RACE_REMEDY if logged else ENV_REMEDY,
    )  # fmt: skip
    alone_path = folder / "fixed_partner.npz"
    if alone_path.is_file():
        with np.load(alone_path) as data:
            alone = {k: data[k] for k in data.files}
        findings += detect_non_stationarity(episodes["own_return"], alone, agents)
    return findings
