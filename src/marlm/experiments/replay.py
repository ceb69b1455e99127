"""Replay a recorded trace under another scheme: the warehouse planners on recorded situations.

:mod:`marlm.eval.replay` holds the method and reads nothing but traces; it takes a *decider*
(a function from a recorded decision point to a decision). This module builds that decider from
the warehouse planners of :mod:`marlm.hybrid` (:func:`planner_decider`) and runs the replay of a
trace file under a scheme by name (:func:`replay_trace`, the command ``marlm replay``). It sits
above ``hybrid`` and ``eval`` because it needs both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlm.envs.warehouse.layout import load_layout
from marlm.envs.warehouse.orders import Order
from marlm.errors import InputError
from marlm.eval.replay import Decider, Decision, DecisionPoint, replay_llm, replay_rl
from marlm.eval.trace import read_trace
from marlm.experiments.settings import LLM_MODEL_DEFAULT, LLM_TIMEOUT_S
from marlm.hybrid.planning.planner import Snapshot, order_distances

if TYPE_CHECKING:
    from rich.table import Table

#: The schemes a trace is replayed under (see :func:`replay_trace`).
SCHEMES = ("llm", "rule", "team", "rl")


def planner_decider(planner: Any, events: Sequence[dict[str, Any]]) -> Decider:
    """A :data:`marlm.eval.replay.Decider` that asks ``planner`` about each recorded situation.

    The :class:`~marlm.hybrid.planning.planner.Snapshot` is rebuilt from the trace: pending orders from
    ``run_start.orders`` (full order records, notes included), idle robots from the ``plan`` event,
    and distances on the recorded layout from each idle robot's cell just before the decision
    (``step.positions`` of the previous step; ``run_start.positions`` or a reset of the recorded
    environment for step 0).

    Raises:
        InputError: the trace's ``run_start`` lacks the orders or the layout.
    """
    start = next((e for e in events if e.get("type") == "run_start"), None)
    if start is None or not start.get("orders"):
        raise InputError(
            "the trace's run_start has no 'orders': cannot rebuild the planner's situation; "
            "replay a trace written by `marlm demo`",
            field="run_start.orders",
        )
    config = start.get("config") or {}
    layout_name = config.get("layout") or start.get("layout")
    if not layout_name:
        raise InputError(
            "the trace's run_start names no layout: cannot rebuild the planner's situation; "
            "replay a trace written by `marlm demo`",
            field="run_start.layout",
        )
    layout = load_layout(layout_name)
    orders = {d["id"]: Order.model_validate(d) for d in start["orders"]}
    agents = [str(a) for a in start.get("agents") or []]
    positions_after = {
        int(e["step"]): e["positions"]
        for e in events
        if e.get("type") == "step" and e.get("positions") is not None
    }
    initial = start.get("positions")

    def positions_before(step: int) -> list[list[int]]:
        nonlocal initial
        if step > 0 and (step - 1) in positions_after:
            return positions_after[step - 1]
        if initial is None:
            from marlm.envs.warehouse import WarehouseEnv

            env = WarehouseEnv(
                layout=config.get("layout", "small"),
                orders=config.get("orders"),
                n_orders=config.get("n_orders", 24),
                n_robots=config.get("n_robots"),
                max_steps=config.get("steps", 600),
                auto_assign=False,
            )
            env.reset(seed=config.get("seed", 0))
            initial = env.robot_positions.tolist()
        return initial

    def decide(point: DecisionPoint) -> Decision:
        pending_ids = [
            p["id"] if isinstance(p, dict) else str(p) for p in point.situation["pending"]
        ]
        pending = tuple(orders[i] for i in pending_ids if i in orders)
        idle = tuple(str(r) for r in point.situation["idle"])
        pos = positions_before(point.step)
        cells = {robot: pos[agents.index(robot)] for robot in idle}
        distance = order_distances(layout, cells, pending)
        t0 = time.perf_counter()
        plan = planner.plan(Snapshot(point.step, pending, idle, distance))
        wall_ms = (time.perf_counter() - t0) * 1e3
        return Decision(
            assignments=list(plan.assignments),
            source=plan.source,
            calls=len(plan.calls),
            latency_ms=sum(c.latency_ms for c in plan.calls) if plan.calls else wall_ms,
            prompt_tokens=sum(c.prompt_tokens for c in plan.calls),
            completion_tokens=sum(c.completion_tokens for c in plan.calls),
            valid=plan.source != "fallback",
            error=plan.error,
            raw=plan.calls[-1].raw if plan.calls else "",
        )

    return decide


def replay_trace(
    trace: str | Path,
    *,
    scheme: str = "llm",
    llm: str = "embedded",
    llm_model: str = LLM_MODEL_DEFAULT,
    llm_timeout_s: float = LLM_TIMEOUT_S,
    limit: int | None = None,
    sweeps: int = 20,
    planner: Any | None = None,
    progress: Callable[[int, int], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Replay a recorded trace under ``scheme`` (``llm``, ``rule``, ``team`` or ``rl``).

    Args:
        trace: trace file or run folder.
        scheme: ``llm``/``rule``/``team``: re-decide every recorded planner decision with that planner;
            ``rl``: batch Q-learning over the recorded transitions.
        llm: backend for ``scheme="llm"`` (see :func:`marlm.llm.backends.make_backend`).
        llm_model, llm_timeout_s: the model name sent to a server and its per-call timeout (s).
        limit: replay at most this many decisions. sweeps: passes over the data for ``rl``.
        planner: use this planner object instead of building one from ``scheme``.
        progress: called as ``progress(done, total)`` over the decisions replayed (not for ``rl``).
        say: called with a line of text before a slow step (loading the model).

    Returns:
        ``(report, warnings)``: the replay report (:func:`marlm.eval.replay.replay_llm` or
        :func:`~marlm.eval.replay.replay_rl`) and what the trace reader could not read.

    Raises:
        InputError: unknown scheme, unreadable trace, or nothing to replay.
    """
    if scheme not in SCHEMES:
        raise InputError(f"got {scheme!r}; allowed: {', '.join(SCHEMES)}", field="--scheme")
    read = read_trace(trace)
    if scheme == "rl":
        return replay_rl(read.events, sweeps=sweeps), read.warnings
    if planner is None:
        from marlm.hybrid.build import build_planner

        if say is not None and scheme != "rule":
            say(f"loading the {scheme} planner on {llm}")
        planner = build_planner(scheme, llm=llm, model_name=llm_model, timeout_s=llm_timeout_s)
    report = replay_llm(
        read.events, planner_decider(planner, read.events), limit=limit, progress=progress
    )
    report["scheme"] = scheme
    report["planner"] = planner.name
    return report, read.warnings


@dataclass(frozen=True)
class ReplayConfig:
    """The settings of ``marlm replay``, checked when made: the trace is there, the ``out`` file
    may be written, the scheme is known (in that order).

    Attributes:
        trace: trace file or run folder.
        scheme: ``llm``, ``rule``, ``team`` or ``rl`` (see :func:`replay_trace`).
        llm, llm_model, llm_timeout_s: the backend of ``llm``/``team``, the model name sent to a
            server and the seconds one call may take.
        limit: replay at most this many decisions (None: all; not ``rl``, which learns from
            every recorded transition).
        sweeps: ``rl``: passes over the data (None: 20).
        out: write the full replay report as JSON here (a new file unless ``overwrite``).

    Raises:
        InputError: a trace that cannot be found, an ``out`` file marlm may not replace, an
            unknown scheme (naming ``--scheme``), an option the scheme would not read
            (``--sweeps`` but with ``rl``, ``--limit`` with ``rl``, ``--llm`` or ``--llm-model``
            with ``rule`` or ``rl``), naming it.
    """

    trace: Path
    scheme: str = "llm"
    llm: str = "embedded"
    llm_model: str = LLM_MODEL_DEFAULT
    llm_timeout_s: float = LLM_TIMEOUT_S
    limit: int | None = None
    sweeps: int | None = None
    out: Path | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        from marlm.eval.outputs import check_output_file
        from marlm.eval.trace import resolve_trace_path

        resolve_trace_path(self.trace)  # a folder without a trace is refused before any work
        if self.out is not None:
            check_output_file(self.out, kind="replay", overwrite=self.overwrite)
        if self.scheme not in SCHEMES:
            raise InputError(
                f"got {self.scheme!r}; allowed: {', '.join(SCHEMES)}", field="--scheme"
            )
        from marlm.experiments.settings import LLM_DEFAULT, LLM_MODEL_DEFAULT

        model = self.scheme in ("llm", "team")
        unread = (  # option, value, read by this scheme, the schemes that read it
            ("--sweeps", self.sweeps, self.scheme == "rl", "rl"),
            ("--limit", self.limit, self.scheme != "rl", "llm, rule or team"),
            ("--llm", None if self.llm == LLM_DEFAULT else self.llm, model, "llm or team"),
            ("--llm-model", None if self.llm_model == LLM_MODEL_DEFAULT else self.llm_model,
             model, "llm or team"),
        )  # fmt: skip
        for option, value, read, readers in unread:
            if value is not None and not read:
                raise InputError(
                    f"--scheme {self.scheme} would ignore it (it is read by --scheme {readers}); "
                    f"drop {option} {value}, or pass such a --scheme",
                    field=option,
                )


@dataclass
class Replay:
    """What :func:`run_replay` produced: the report of :func:`replay_trace` (``report``), what
    the trace reader could not read (``warnings``), and the config."""

    config: ReplayConfig
    report: dict[str, Any]
    warnings: list[str]

    def table(self) -> Table:
        """The report as a rich ``Table``: per agent (``rl``), else the replayed figures beside
        the recorded ones."""
        from rich.table import Table

        r, c = self.report, self.config
        if c.scheme == "rl":
            table = Table(title=f"RL replay: batch Q-learning over {c.trace} ({r['state_source']})")
            for key, header in _RL_COLUMNS.items():
                table.add_column(header, justify="left" if key == "agent" else "right")
            for row in r["agents"]:
                table.add_row(*[_fmt(row[key]) for key in _RL_COLUMNS])
            return table
        table = Table(title=f"{c.scheme} replay of {r['decisions']} recorded decisions")
        table.add_column("figure")
        table.add_column("replayed", justify="right")
        table.add_column("recorded", justify="right")
        rec = r["recorded"]
        rows = [
            ("exact agreement", _fmt(r["exact_agreement"]), "1"),
            ("pair agreement (Jaccard)", _fmt(r["pair_agreement"]), "1"),
            ("valid rate", _fmt(r["valid_rate"]), _fmt(1 - rec["fallback_rate"])),
            ("fallback rate", _fmt(r["fallback_rate"]), _fmt(rec["fallback_rate"])),
            ("calls per decision", _fmt(r["calls_per_decision"]),
             _fmt(rec["calls_per_decision"])),
            *[(f"latency {key} (ms)", _fmt(r["latency_ms"][key]), _fmt(rec["latency_ms"][key]))
              for key in ("mean", "p50", "p95")],
            ("tokens per decision (mean)", _fmt(r["tokens"]["mean"]), _fmt(rec["tokens"]["mean"])),
        ]  # fmt: skip
        for row in rows:
            table.add_row(*row)
        return table

    def lines(self) -> list[str]:
        """The lines under the table: the team return (``rl``), what was measured and what
        estimated."""
        r = self.report
        team = (
            [f"team return (sum) {_fmt(r['return_sum'])}, variance of per-agent returns "
             f"{_fmt(r['return_var_across_agents'])}"]
            if self.config.scheme == "rl" else []
        )  # fmt: skip
        return [*team, f"measured: {r['measured']}", f"estimated: {r['estimated']}"]


#: Columns of the ``rl`` replay table: report key -> header.
_RL_COLUMNS = {
    "agent": "agent",
    "transitions": "n",
    "return": "return",
    "reward_mean": "r mean",
    "reward_var": "r var",
    "td_error_mean_abs": "|TD err|",
    "v_start": "V(s0) est.",
    "greedy_agreement": "greedy agr. est.",
}


def _fmt(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def run_replay(
    config: ReplayConfig, *, progress: Callable[[int, int], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> Replay:  # fmt: skip
    """``marlm replay``: :func:`replay_trace` under ``config``, and the report written to
    ``config.out`` as JSON (keys starting with ``_`` left out) when given.

    Args:
        config: the settings.
        progress, say: as in :func:`replay_trace`.

    Raises:
        InputError: as :func:`replay_trace`.
    """
    c = config
    report, warnings = replay_trace(
        c.trace, scheme=c.scheme, llm=c.llm, llm_model=c.llm_model, llm_timeout_s=c.llm_timeout_s,
        limit=c.limit, sweeps=20 if c.sweeps is None else c.sweeps, say=say, progress=progress,
    )  # fmt: skip
    if c.out is not None:
        c.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {k: v for k, v in report.items() if not k.startswith("_")}
        c.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    return Replay(c, report, warnings)


__all__ = ["Replay", "ReplayConfig", "planner_decider", "replay_trace", "run_replay"]
