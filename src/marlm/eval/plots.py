"""Plots of a run: per-agent reward curves, latency histograms, throughput, LLM timeline.

All figures are ``matplotlib.figure.Figure`` objects drawn on the Agg canvas (no display needed;
``matplotlib.pyplot`` and its global figure registry are never imported) and are written to a
temporary file first and renamed, so a crash never leaves a half-written PNG behind. The
episode animation is :mod:`marlm.eval.gif`.
matplotlib (most of a second to import) and Pillow are imported by the first plot, not with this
module, so a command that writes no plot never loads them. :class:`PlotProcess` draws a plot in a
forked process that imports matplotlib while the caller is still computing what to plot.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from marlm.envs.palette import agent_colour
from marlm.eval.outputs import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure(figsize: tuple[float, float]) -> Figure:
    """A new figure on the Agg canvas (matplotlib imported on first use)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: str | Path, *, tight: bool = True) -> Path:
    """Write ``fig`` at 100 dpi; ``tight`` crops it to its contents (``bbox_inches="tight"``, which
    draws the figure twice: once to measure, once to write); otherwise the figure's own margins.
    Written to a temporary file, renamed when complete; the temporary file is removed if the
    write fails (a full disk)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(p) as tmp:
        fig.savefig(
            tmp,
            format=p.suffix.lstrip(".") or "png",
            dpi=100,
            bbox_inches="tight" if tight else None,
        )
    return p


def _import_matplotlib() -> None:
    """Import what :func:`_figure` and :func:`_save` need, for a process that only writes 2-D
    plots to files (the child of :class:`PlotProcess`): most of a second of CPU, of which this
    leaves out two parts such a process never uses (about a third of it):

    - the property list matplotlib writes into the ``set()`` docstring of each of its ~100
      artist classes as it defines them (``matplotlib.artist.kwdoc``, which reads every setter's
      docstring), text for ``help()``; the docstrings get an empty list instead;
    - the 3-D toolkit ``mpl_toolkits.mplot3d``, which ``matplotlib.projections`` imports only to
      register the ``"3d"`` projection (made unimportable while matplotlib imports, so
      ``projections`` skips it as it does where the toolkit is missing).

    Nothing is left out where matplotlib is already imported, and a matplotlib whose import
    fails without those parts (another version) is imported whole. Drawing is unchanged: the
    same figure gives the same PNG bytes (tested).
    """
    if "matplotlib.figure" in sys.modules:
        return
    try:
        with _without_docs_and_3d():
            import matplotlib.backends.backend_agg  # noqa: F401
            import matplotlib.figure  # noqa: F401
    except ImportError:
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401


@contextmanager
def _without_docs_and_3d() -> Iterator[None]:
    """While matplotlib imports: no property lists in docstrings, no 3-D toolkit (see above)."""
    import matplotlib.artist

    kwdoc = getattr(matplotlib.artist, "kwdoc", None)  # matplotlib's private helper, if present
    if kwdoc is not None:
        matplotlib.artist.kwdoc = _no_kwdoc
    toolkit = "mpl_toolkits.mplot3d"
    # sys.modules holds None for a blocked import (the import system's mark), which its
    # typeshed type leaves out
    modules = cast("dict[str, ModuleType | None]", sys.modules)
    block = toolkit not in modules
    if block:
        modules[toolkit] = None  # an import of it raises ImportError
    try:
        with warnings.catch_warnings():  # projections warns when it cannot import the toolkit
            warnings.filterwarnings("ignore", "Unable to import Axes3D", UserWarning)
            yield
    finally:
        if kwdoc is not None:
            matplotlib.artist.kwdoc = kwdoc
        if block and modules.get(toolkit, 0) is None:
            del modules[toolkit]


def _no_kwdoc(artist: object) -> str:
    return ""


#: Where a forked child can draw: Linux (macOS system libraries are not safe to use after fork;
#: Windows has no fork).
FORK_AVAILABLE = sys.platform.startswith("linux") and hasattr(os, "fork")


class PlotProcess:
    """Draw one plot in a forked child process that imports matplotlib while this one works on.

    Starting a ``PlotProcess`` forks a child that imports matplotlib at once, then waits for one
    call: :meth:`submit` sends ``fn(*args, **kwargs)`` (pickled through a pipe, from a thread, so
    the caller never waits for the child), :meth:`result` waits for the child and returns the
    call's value or raises its exception (with the child's traceback as a note). Use it as a
    context manager: on leaving the block the child is always waited for, so no child outlives
    it; one given no call (the block left early, e.g. on bad input) is killed first, one given
    its call finishes it.

    The point: the plot's ~1 s of CPU (import, draw, PNG) runs beside the work that produces its
    data, instead of after it. The child runs without the cyclic garbage collector (it ends after
    one call). The child writes nothing to the parent's stdout or stderr and never
    flushes their buffers (it leaves by ``os._exit``); it takes no lock that another thread of the
    parent could hold at the fork (a progress bar's refresh thread, say), hence the fork is safe.

    With ``fork=False``, or where :data:`FORK_AVAILABLE` is false, :meth:`submit` runs the call in
    this process and :meth:`result` returns its value.
    """

    def __init__(self, *, fork: bool = True, warm: Callable[[], None] = _import_matplotlib) -> None:
        self._pid: int | None = None
        # The parent's ends of the pipes to the child: set with the pid, each None once closed.
        self._call_w: int | None = None
        self._reply_r: int | None = None
        self._value: Any = None
        self._sender: Any = None
        self._send_error: BaseException | None = None
        if not (fork and FORK_AVAILABLE):
            return
        call_r, call_w = os.pipe()
        reply_r, reply_w = os.pipe()
        with warnings.catch_warnings():  # Python 3.12+ warns on fork beside threads: see above
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
            code = 1
            try:
                os.close(call_w)
                os.close(reply_r)
                code = _serve_one_call(call_r, reply_w, warm)
            finally:
                os._exit(code)
        os.close(call_r)
        os.close(reply_w)
        self._pid, self._call_w, self._reply_r = pid, call_w, reply_r

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (``None`` in-process or once it has ended)."""
        return self._pid

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``fn(*args, **kwargs)`` in the child (arguments must pickle; ``fn`` by name).

        Raises:
            RuntimeError: a second call to a child (it takes one).
        """
        if self._pid is None:
            self._value = fn(*args, **kwargs)
            return
        if self._call_w is None:
            raise RuntimeError("a PlotProcess takes one call; this one has had it")
        import threading

        payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        self._sender = threading.Thread(
            target=self._send, args=(self._call_w, payload), daemon=True
        )
        self._sender.start()

    def _send(self, call_w: int, payload: bytes) -> None:
        try:
            with os.fdopen(call_w, "wb") as f:
                f.write(payload)
        except OSError as e:  # the child died first; result() reports it
            self._send_error = e
        finally:
            self._call_w = None

    def result(self) -> Any:
        """Wait for the child and return the value of the submitted call.

        Raises:
            the call's own exception, with the child's traceback added as a note; RuntimeError
            when the child ended without an answer.
        """
        if self._pid is None:
            return self._value
        if self._sender is not None:
            self._sender.join()
        reply_r = self._reply_r
        if reply_r is None:  # closed only with the pid cleared: a fault of this class
            raise RuntimeError("the plot process's reply pipe is closed while it runs")
        try:
            with os.fdopen(reply_r, "rb") as f:
                reply = f.read()
        finally:
            self._reply_r = None
            self._wait()
        if not reply:
            raise RuntimeError(f"the plot process ended without an answer ({self._send_error})")
        ok, value, trace = pickle.loads(reply)
        if ok:
            return value
        if trace:
            value.add_note(f"in the plot process:\n{trace}")
        raise value

    def _wait(self) -> None:
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None

    def __enter__(self) -> PlotProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pid is None:
            return
        if self._sender is None:  # no call: the child has nothing to finish (it may be importing)
            os.kill(self._pid, signal.SIGKILL)
        else:
            self._sender.join()
        for fd in (self._call_w, self._reply_r):  # a child waiting for its call reads EOF, exits
            if fd is not None:
                os.close(fd)
        self._call_w = self._reply_r = None
        self._wait()


def _serve_one_call(call_r: int, reply_w: int, warm: Callable[[], None]) -> int:
    """The child of :class:`PlotProcess`: warm up, read one call, run it, send the outcome."""
    # One call, then os._exit: what the call leaves in reference cycles goes back to the system
    # with the process, and the collector's passes over the objects of matplotlib's import
    # (tens of thousands) were about a tenth of this process's CPU.
    gc.disable()
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the child ends by os._exit
    sys.stdout = sys.stderr = devnull  # never write to, or flush, the parent's buffers
    try:
        warm()
        with os.fdopen(call_r, "rb") as f:
            payload = f.read()
        if not payload:  # the parent closed the pipe without a call
            return 0
        fn, args, kwargs = pickle.loads(payload)
        reply = (True, fn(*args, **kwargs), "")
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
        reply = (False, e, traceback.format_exc())
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # noqa: BLE001 - an exception that does not pickle
        data = pickle.dumps((False, RuntimeError(repr(reply[1])), f"{reply[2]}\n{e}"))
    with os.fdopen(reply_w, "wb") as f:
        f.write(data)
    return 0


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average of ``x: float64[n]`` over ``window`` samples, ignoring NaN.

    Sample ``k`` averages ``x[max(0, k - window + 1) : k + 1]``, so the curve starts at the first sample
    (no lag-free centring, no shortening). Returns ``float64[n]``; a window of 1 returns ``x``.
    """
    x = np.asarray(x, dtype=np.float64)
    if window <= 1 or x.size == 0:
        return x.copy()
    valid = ~np.isnan(x)
    c = np.concatenate([[0.0], np.cumsum(np.where(valid, x, 0.0))])
    n = np.concatenate([[0], np.cumsum(valid)])
    idx = np.arange(x.size)
    lo = np.maximum(0, idx - window + 1)
    counts = n[idx + 1] - n[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, (c[idx + 1] - c[lo]) / counts, np.nan)


def drawn_points(y: np.ndarray, smooth: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x int64[m], y[x])``: the points of a curve smoothed over ``smooth`` samples that a plot
    draws: every ``smooth // 4``-th one and the last (all of them when ``smooth < 8``).

    A trailing average over ``smooth`` samples moves little within a quarter of its window, so the
    drawn line looks the same, and a 30000-episode curve costs a few hundred points instead of
    30000 (half a second of rendering per figure).
    """
    step = max(1, smooth // 4)
    x = np.arange(0, y.size, step)
    if y.size and x[-1] != y.size - 1:
        x = np.append(x, y.size - 1)
    return x, y[x]


def team_curve(curves: Mapping[str, np.ndarray], team: Literal["sum", "mean"]) -> np.ndarray:
    """The team curve of per-agent curves: their sum or their mean at each index.

    Curves may differ in length (an agent that finished early); missing values (NaN or past the end)
    count as 0 in the sum and are left out of the mean. Returns ``float64[max_len]``.
    """
    if team not in ("sum", "mean"):
        raise ValueError(f"team must be 'sum' or 'mean', not {team!r}")
    n = max((len(v) for v in curves.values()), default=0)
    stack = np.full((len(curves), n), np.nan)
    for i, v in enumerate(curves.values()):
        stack[i, : len(v)] = np.asarray(v, dtype=np.float64)
    if team == "sum":
        return np.nansum(stack, axis=0)
    with np.errstate(invalid="ignore"):
        counts = np.sum(~np.isnan(stack), axis=0)
        return np.where(counts > 0, np.nansum(stack, axis=0) / np.maximum(counts, 1), np.nan)


def curve_colours(agents: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """Matplotlib colours (RGB in 0-1) of per-agent curves: the ``k``-th agent gets
    :func:`marlm.envs.palette.agent_colour` ``(k)``, the colour it has in the episode GIF
    (``agents`` in ``possible_agents`` order, as :func:`marlm.eval.metrics.reward_curves` gives)."""
    colours = {}
    for k, a in enumerate(agents):
        r, g, b = agent_colour(k)
        colours[a] = (r / 255, g / 255, b / 255)
    return colours


#: The team curve of :func:`plot_reward_curves`: a light-grey band under the agents' lines.
TEAM_COLOUR = (0.72, 0.72, 0.72)
TEAM_WIDTH = 5.0


def plot_reward_curves(
    curves: Mapping[str, np.ndarray],
    path: str | Path,
    *,
    team: Literal["sum", "mean"] = "sum",
    smooth: int = 1,
    cumulative: bool = False,
    xlabel: str = "step",
    title: str | None = None,
    tight: bool = True,
    x: np.ndarray | None = None,
) -> Path:
    """Plot one reward curve per agent and the team curve, labelled with how it was formed.

    The team curve is a wide light-grey band drawn underneath (``zorder`` 1); each agent's curve
    is a thin line in its colour on top of it (``zorder`` 3), so no agent's line hides under the
    team's, not even where they coincide (one robot earning all of the team's reward). With a
    single agent the team curve is that agent's curve, so none is drawn.

    Args:
        curves: ``{agent: float64[n]}``, per-step rewards or per-episode returns; NaN marks no value.
        path: the PNG to write.
        team: ``"sum"`` (team curve = sum of agents' curves, as for a shared team reward) or ``"mean"``.
            The legend says which, e.g. ``team (sum of 2 agents)``; no team curve for one agent.
        smooth: trailing moving-average window applied to every curve after the team curve is
            formed (1 = none). With ``team="sum"`` the smoothed per-agent curves still add up to the
            smoothed team curve where every agent has a value, because the average is linear.
        cumulative: plot running totals (returns so far) instead of per-step values.
        xlabel: the x-axis label (``"step"`` or ``"episode"``).
        tight: crop the 800 x 450 px image to its contents (two draws); ``False`` keeps it at
            800 x 450 with fixed margins (one draw, a tenth of a second less), wide enough for
            y tick labels of up to 5 characters (``-2.75``, ``-12.5``): per-episode returns,
            not the cumulative sums of long runs.
        x: ``int64[n]``, where each value lies on the x axis (default ``0..n-1``): a long run's
            curve given at evenly spaced steps, each value the sum since the previous point.

    Returns:
        The written path.

    Raises:
        ValueError: ``curves`` is empty, ``team`` is unknown or ``smooth < 1``.
    """
    if not curves:
        raise ValueError("no reward curves to plot")
    if smooth < 1:
        raise ValueError(f"smooth must be >= 1, not {smooth}")
    raw = {k: np.asarray(v, dtype=np.float64) for k, v in curves.items()}
    if cumulative:
        raw = {k: np.cumsum(np.nan_to_num(v)) for k, v in raw.items()}
    fig = _figure((8, 4.5))
    ax = fig.subplots()
    at = (lambda px, py: (px, py)) if x is None else (lambda px, py: (np.asarray(x)[px], py))
    if len(raw) > 1:  # drawn first and underneath: the agents' lines stay visible on top of it
        label = f"team ({team} of {len(raw)} agents)"
        teamc = at(*drawn_points(moving_average(team_curve(raw, team), smooth), smooth))
        ax.plot(*teamc, label=label, color=TEAM_COLOUR, lw=TEAM_WIDTH, zorder=1)
    colours = curve_colours(list(raw))
    for name, v in raw.items():
        ax.plot(
            *at(*drawn_points(moving_average(v, smooth), smooth)), label=name, linewidth=1.2,
            color=colours[name], zorder=3,
        )  # fmt: skip
    what = "return so far" if cumulative else "reward"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(what if smooth == 1 else f"{what} (moving average, {smooth})")
    default = f"Per-agent {what} and team {team}" if len(raw) > 1 else what.capitalize()
    ax.set_title(title or default)
    ax.grid(alpha=0.3)
    handles = ax.get_lines()[1:] + ax.get_lines()[:1] if len(raw) > 1 else ax.get_lines()
    ax.legend(handles=handles, fontsize=8, ncol=2 if len(raw) > 6 else 1, loc="best")
    if not tight:  # figure fractions of 800 x 450 px: the y label and 5-character tick labels
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.11, top=0.92)
    return _save(fig, path, tight=tight)


def plot_latency_histogram(
    series: Mapping[str, Sequence[float] | np.ndarray],
    path: str | Path,
    *,
    title: str | None = None,
) -> Path:
    """Histogram of latencies in milliseconds, one panel per series, with p50/p99 marked.

    Args:
        series: ``{"control step": [ms, ...], "LLM call": [ms, ...]}``, each a list or a
            ``float64[n]`` array; empty series get a note.
    """
    names = list(series)
    fig = _figure((5 * max(1, len(names)), 3.8))
    axes = fig.subplots(1, max(1, len(names)))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names, strict=False):
        v = np.asarray(series[name], dtype=np.float64)
        if v.size == 0:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.hist(v, bins=min(50, max(5, v.size // 5)), color="tab:blue", alpha=0.8)
            for q, style in ((50, "--"), (99, ":")):
                x = float(np.percentile(v, q))
                ax.axvline(x, color="black", linestyle=style, label=f"p{q} = {x:.3g} ms")
            ax.legend(fontsize=8)
        ax.set_title(f"{name} latency (n = {v.size})")
        ax.set_xlabel("ms")
        ax.set_ylabel("count")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_throughput(
    steps: np.ndarray,
    delivered: np.ndarray,
    path: str | Path,
    *,
    window: int = 200,
    title: str | None = None,
) -> Path:
    """Cumulative deliveries and windowed throughput (deliveries per 1000 steps) over time.

    Args:
        steps: ``int64[n]`` step numbers; ``delivered``: ``int64[n]`` cumulative deliveries at each.
        window: steps over which the throughput rate is measured (a trailing window: the rate at
            step ``t`` counts the deliveries of steps ``t - window`` to ``t``), named in the legend.
            Over the first ``window`` steps the rate is over the steps since the start, drawn
            dotted.
    """
    steps = np.asarray(steps)
    delivered = np.asarray(delivered, dtype=np.float64)
    fig = _figure((8, 3.8))
    ax = fig.subplots()
    ax.step(steps, delivered, where="post", color="tab:green", label="delivered (cumulative)")
    ax.set_xlabel("step")
    ax.set_ylabel("orders delivered")
    if steps.size > 1:
        lag = np.searchsorted(steps, steps - window, side="left")
        span = np.maximum(steps - steps[lag], 1)
        rate = 1000.0 * (delivered - delivered[lag]) / span
        ax2 = ax.twinx()
        label = f"per 1000 steps (rolling window of {window} steps)"
        full = steps - steps[0] >= window  # before that the window is shorter (the run's start)
        if not full.all():  # dotted: a few early deliveries over a short span read as a spike
            k = int(np.argmax(full)) + 1 if full.any() else steps.size
            ax2.plot(
                steps[:k], rate[:k], color="tab:orange", alpha=0.8, linestyle=":",
                label=f"per 1000 steps (first {window} steps: since the start)",
            )  # fmt: skip
        if full.any():
            ax2.plot(steps[full], rate[full], color="tab:orange", alpha=0.8, label=label)
        ax2.set_ylabel(f"deliveries per 1000 steps ({window}-step window)")
        ax2.legend(loc="lower right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title or "Throughput over time")
    return _save(fig, path)


def plot_llm_timeline(
    calls: Sequence[dict[str, float | bool | int | None]],
    path: str | Path,
    *,
    n_steps: int | None = None,
    failures: Sequence[tuple[int, str]] = (),
    title: str | None = None,
) -> Path:
    """LLM calls on the control-step timeline: when each was asked, how long it took, how it ended.

    Each call is a marker at its ``step_requested`` (x) and its ``latency_ms`` (y, log scale),
    green when valid, red when the answer was invalid, grey when no answer came (a timeout, a
    failed backend, the run's end: :data:`marlm.eval.metrics.UNANSWERED`), orange when the
    planner fell back to the rule after it; a thin line runs on to ``step_applied`` when the
    plan took effect later than it was asked for.

    Args:
        calls: ``llm_call`` events: dicts with ``step_requested``, ``step_applied`` (may be
            ``None``: never applied), ``latency_ms``, ``status`` (or ``valid``) and ``fallback``.
        n_steps: the run length, for the x-axis.
        failures: ``(step, kind)`` pairs drawn as faint red vertical lines.

    With no call, the chart says "no LLM calls" and has no legend.
    """
    from matplotlib.lines import Line2D

    from marlm.eval.metrics import INVALID, UNANSWERED, call_status

    fig = _figure((8, 3.4))
    ax = fig.subplots()
    for step, _kind in failures:
        ax.axvline(step, color="red", alpha=0.25, lw=1)
    any_latency = False
    for c in calls:
        start = c.get("step_requested")
        if start is None:
            continue
        latency = float(c.get("latency_ms") or 0.0)
        y = max(latency, 1e-3)
        any_latency = any_latency or latency > 0
        end_of = call_status(c)
        color = (
            "tab:red" if end_of in INVALID else "tab:gray" if end_of in UNANSWERED else "tab:green"
        )
        if c.get("fallback"):
            color = "tab:orange"
        end = c.get("step_applied")
        if end is not None and end > start:
            ax.plot([start, end], [y, y], color=color, lw=1, alpha=0.6)
        ax.plot([start], [y], marker="o", color=color, ms=5, linestyle="none")
    if any_latency:
        ax.set_yscale("log")
    ax.set_xlabel("control step (marker: asked; line: until its plan took effect)")
    ax.set_ylabel("LLM call latency (ms)")
    if n_steps:
        ax.set_xlim(0, n_steps)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"LLM calls on the control timeline (n = {len(calls)})")
    if not calls:  # a legend of kinds no marker has would read as if some were there
        ax.text(0.5, 0.5, "no LLM calls", ha="center", va="center", transform=ax.transAxes)
        return _save(fig, path)
    handles = [
        Line2D([], [], color="tab:green", marker="o", linestyle="none", label="valid"),
        Line2D([], [], color="tab:red", marker="o", linestyle="none", label="invalid"),
        Line2D([], [], color="tab:gray", marker="o", linestyle="none", label="unanswered"),
        Line2D([], [], color="tab:orange", marker="o", linestyle="none", label="then fallback"),
        Line2D([], [], color="red", alpha=0.4, label="failure event"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="best")
    return _save(fig, path)


__all__ = [
    "FORK_AVAILABLE",
    "PlotProcess",
    "drawn_points",
    "moving_average",
    "plot_latency_histogram",
    "plot_llm_timeline",
    "curve_colours",
    "plot_reward_curves",
    "plot_throughput",
    "team_curve",
]
