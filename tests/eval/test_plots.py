"""Plots: the team curve says sum or mean; images and GIFs are real files of the right shape."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from marlm.envs.palette import agent_colour
from marlm.eval.gif import save_episode_gif
from marlm.eval.plots import (
    FORK_AVAILABLE,
    TEAM_COLOUR,
    PlotProcess,
    drawn_points,
    moving_average,
    plot_latency_histogram,
    plot_llm_timeline,
    plot_reward_curves,
    plot_throughput,
    team_curve,
)


def test_team_curve_sum_is_minus_two_and_mean_is_minus_one() -> None:
    curves = {"a": np.full(5, -1.0), "b": np.full(5, -1.0)}
    np.testing.assert_array_equal(team_curve(curves, "sum"), np.full(5, -2.0))
    np.testing.assert_array_equal(team_curve(curves, "mean"), np.full(5, -1.0))
    # Per-agent curves add up to the team sum, also after smoothing (the average is linear).
    rng = np.random.default_rng(0)
    c = {"a": rng.normal(size=50), "b": rng.normal(size=50)}
    np.testing.assert_allclose(
        moving_average(c["a"], 7) + moving_average(c["b"], 7),
        moving_average(team_curve(c, "sum"), 7),
    )


def test_team_curve_with_an_agent_that_finished_early() -> None:
    curves = {"a": np.array([1.0, 1.0, 1.0]), "b": np.array([3.0])}
    np.testing.assert_array_equal(team_curve(curves, "sum"), [4.0, 1.0, 1.0])
    np.testing.assert_array_equal(team_curve(curves, "mean"), [2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="'sum' or 'mean'"):
        team_curve(curves, "max")  # type: ignore[arg-type]


def test_moving_average_is_trailing_and_skips_nan() -> None:
    np.testing.assert_allclose(moving_average(np.array([1.0, 3.0, 5.0, np.nan]), 2), [1, 2, 4, 5])


def test_reward_plot_legend_names_the_team_rule(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    seen = {}
    orig = plt.Axes.legend

    def spy(self, *a, **k):
        leg = orig(self, *a, **k)
        seen["labels"] = [t.get_text() for t in leg.get_texts()]
        return leg

    plt.Axes.legend = spy
    try:
        out = plot_reward_curves(
            {"robot_0": np.full(4, -1.0), "robot_1": np.full(4, -1.0)},
            tmp_path / "r.png",
            team="mean",
        )
    finally:
        plt.Axes.legend = orig
    assert seen["labels"] == ["robot_0", "robot_1", "team (mean of 2 agents)"]
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 200
    assert not list(tmp_path.glob("*.tmp"))


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the plots draw on, kept to read their artists back."""
    from marlm.eval import plots

    made: list = []
    figure = plots._figure

    def keep(*args, **kwargs):
        fig = figure(*args, **kwargs)
        made.append(fig)
        return fig

    monkeypatch.setattr(plots, "_figure", keep)
    return made


def test_every_agents_line_is_drawn_above_the_team_curve(tmp_path: Path, figures: list) -> None:
    # robot_1 earns all of the team's reward: its curve is the team curve, point for point.
    curves = {"robot_0": np.zeros(50), "robot_1": np.linspace(0, 1, 50), "robot_2": np.zeros(50)}
    plot_reward_curves(curves, tmp_path / "r.png", team="sum")
    (fig,) = figures
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    team = lines.pop("team (sum of 3 agents)")
    assert sorted(lines) == ["robot_0", "robot_1", "robot_2"]
    for name, line in lines.items():
        assert line.get_zorder() > team.get_zorder(), name  # on top of the team band
        assert line.get_alpha() in (None, 1.0), name  # opaque: its colour as drawn
    np.testing.assert_array_equal(lines["robot_1"].get_ydata(), team.get_ydata())
    with Image.open(tmp_path / "r.png") as im:  # robot_1's colour shows where the curves meet
        assert _pixels_near(im, np.array(agent_colour(1), dtype=np.float64)) > 300


def test_one_agent_has_no_team_curve_and_no_plural(tmp_path: Path, figures: list) -> None:
    # GridWorld's curves.png: a single agent, whose return is the team's.
    plot_reward_curves({"agent": np.arange(30.0)}, tmp_path / "c.png", smooth=3, xlabel="episode")
    (fig,) = figures
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["agent"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["agent"]
    assert ax.get_title() == "Reward"


def test_throughput_legend_says_its_number_is_a_window(tmp_path: Path, figures: list) -> None:
    plot_throughput(np.arange(600), np.arange(600) // 10, tmp_path / "t.png", window=200)
    (fig,) = figures
    texts = [
        t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()
    ]
    assert sorted(texts) == [
        "delivered (cumulative)",
        "per 1000 steps (first 200 steps: since the start)",
        "per 1000 steps (rolling window of 200 steps)",
    ]
    early, rate = fig.axes[1].get_lines()  # the shorter windows of the start, dotted
    assert early.get_linestyle() == ":" and rate.get_linestyle() == "-"
    assert early.get_xdata()[-1] == rate.get_xdata()[0] == 200
    np.testing.assert_allclose(rate.get_ydata(), 100.0, atol=5)  # one delivery per 10 steps


def test_an_llm_timeline_without_calls_says_so_and_has_no_legend(
    tmp_path: Path, figures: list
) -> None:
    plot_llm_timeline([], tmp_path / "c.png", n_steps=100)
    (fig,) = figures
    ax = fig.axes[0]
    assert ax.get_legend() is None
    assert [t.get_text() for t in ax.texts] == ["no LLM calls"]


def test_a_long_smoothed_curve_is_drawn_at_four_points_a_window_with_its_last() -> None:
    y = np.arange(30000, dtype=np.float64)
    x, yx = drawn_points(y, 600)
    assert x[0] == 0 and x[-1] == 29999 and np.all(np.diff(x) <= 150)
    assert x.size == 201 and np.array_equal(yx, y[x])
    x, _ = drawn_points(y[:10], 1)  # unsmoothed (or lightly smoothed): every point
    assert np.array_equal(x, np.arange(10))
    assert drawn_points(np.zeros(0), 600)[0].size == 0


def test_gif_has_every_frame_in_order(tmp_path: Path) -> None:
    frames = [np.full((6, 9, 3), 40 * i, dtype=np.uint8) for i in range(5)]  # non-square
    path = save_episode_gif(frames, tmp_path / "episode.gif", fps=5)
    with Image.open(path) as im:
        assert im.n_frames == 5 and im.size == (9, 6)
        im.seek(3)
        assert im.convert("RGB").getpixel((0, 0)) == (120, 120, 120)
    with pytest.raises(ValueError, match=r"frame 1: expected uint8\[H, W, 3\]"):
        save_episode_gif([frames[0], frames[1].astype(np.float32)], tmp_path / "bad.gif")
    with pytest.raises(ValueError, match="no frames"):
        save_episode_gif([], tmp_path / "none.gif")


def test_other_plots_write_pngs(tmp_path: Path) -> None:
    plot_latency_histogram({"control step": [0.1, 0.2, 0.3], "LLM call": []}, tmp_path / "l.png")
    plot_throughput(np.arange(100), np.arange(100) // 10, tmp_path / "t.png", window=20)
    plot_llm_timeline(
        [
            {"step_requested": 3, "step_applied": 9, "valid": True, "fallback": False},
            {"step_requested": 20, "step_applied": None, "valid": False, "fallback": True},
        ],
        tmp_path / "c.png",
        n_steps=100,
        failures=[(20, "invalid_llm_answer")],
    )
    for name in ("l.png", "t.png", "c.png"):
        with Image.open(tmp_path / name) as im:
            assert im.format == "PNG"


def _pixels_near(image: Image.Image, rgb: np.ndarray, tol: float = 24.0) -> int:
    px = np.asarray(image.convert("RGB"), dtype=np.float64)
    return int((np.abs(px - rgb).max(axis=2) <= tol).sum())


def test_reward_plot_of_a_training_run_is_legible(tmp_path: Path) -> None:
    # The curves.png of ``marlm train race``: 30000 episodes, two agents, a 600-episode average.
    rng = np.random.default_rng(0)
    curves = {f"agent_{i}": rng.normal(0.2 + 0.4 * i, 0.1, 30000) for i in range(2)}
    out = plot_reward_curves(
        curves, tmp_path / "curves.png", team="sum", smooth=600, xlabel="episode",
        title="GridRace iql, reward shared: own return per agent", tight=False,
    )  # fmt: skip
    with Image.open(out) as im:
        assert im.size == (800, 450)  # 8 x 4.5 in at 100 dpi: one draw, fixed margins
        for k in range(2):  # each agent in its palette colour (drawn at alpha 0.8 on white)
            shade = 0.8 * np.array(agent_colour(k)) + 0.2 * 255
            assert _pixels_near(im, shade) > 300, k
        assert _pixels_near(im, 255 * np.array(TEAM_COLOUR), tol=6) > 300  # the team band
        # the frame is not crowded out: the title and the axis labels leave the plot area white
        assert _pixels_near(im, np.full(3, 255.0), tol=1) > 0.5 * 800 * 450


needs_fork = pytest.mark.skipif(not FORK_AVAILABLE, reason="the plot process needs os.fork (Linux)")


@needs_fork
def test_the_plot_process_draws_the_same_file_in_another_process(tmp_path: Path) -> None:
    curves = {"agent_0": np.linspace(-1, 1, 500), "agent_1": np.linspace(1, -1, 500)}
    with PlotProcess() as plotter:
        assert plotter.pid not in (None, os.getpid())
        plotter.submit(plot_reward_curves, curves, tmp_path / "child.png", smooth=20)
        assert plotter.result() == tmp_path / "child.png"
    with PlotProcess() as plotter:
        plotter.submit(os.getpid)
        assert plotter.result() != os.getpid()
    with PlotProcess() as plotter:  # one call, then the process ends: no garbage collector
        plotter.submit(gc.isenabled)
        assert plotter.result() is False
    assert gc.isenabled()
    plot_reward_curves(curves, tmp_path / "here.png", smooth=20)
    assert (tmp_path / "child.png").read_bytes() == (tmp_path / "here.png").read_bytes()


@needs_fork
def test_an_error_in_the_plot_process_is_raised_here(tmp_path: Path) -> None:
    with PlotProcess() as plotter:
        plotter.submit(plot_reward_curves, {}, tmp_path / "none.png")
        with pytest.raises(ValueError, match="no reward curves") as info:
            plotter.result()
    assert any("in the plot process" in note for note in info.value.__notes__)
    assert not (tmp_path / "none.png").exists()


@needs_fork
@pytest.mark.parametrize("submitted", [False, True])
def test_no_plot_process_outlives_its_block(tmp_path: Path, submitted: bool) -> None:
    # Left early by an error: a child still waiting for its call exits, one that has its call
    # finishes it; both are waited for before the block ends.
    with pytest.raises(KeyError), PlotProcess() as plotter:
        pid = plotter.pid
        if submitted:
            plotter.submit(plot_reward_curves, {"a": np.zeros(3)}, tmp_path / "a.png")
        raise KeyError("the caller failed")
    assert plotter.pid is None
    with pytest.raises(ChildProcessError):  # already reaped: no zombie, no orphan
        os.waitpid(pid, os.WNOHANG)


def test_without_fork_the_plot_process_runs_the_call_here() -> None:
    with PlotProcess(fork=False) as plotter:
        assert plotter.pid is None
        plotter.submit(os.getpid)
        assert plotter.result() == os.getpid()


def test_the_plot_process_import_leaves_out_3d_and_property_docs_and_draws_the_same(
    tmp_path: Path,
) -> None:
    # A fresh interpreter, as the plot process is where the command has not loaded matplotlib:
    # _import_matplotlib skips the 3-D toolkit and the artists' set() property lists, restores
    # kwdoc, leaves the toolkit importable, and the figure it draws is byte for byte the one a
    # normally imported matplotlib draws (here, in the test process).
    curves = {"agent_0": np.linspace(-1, 1, 500), "agent_1": np.linspace(1, -1, 500)}
    np.savez(tmp_path / "curves.npz", **curves)
    probe = (
        "import sys, warnings\n"
        "import numpy as np\n"
        "from marlm.eval import plots\n"
        "warnings.simplefilter('error')\n"
        "plots._import_matplotlib()\n"
        "import matplotlib.artist\n"
        "from matplotlib.lines import Line2D\n"
        "print('3d loaded:', 'mpl_toolkits.mplot3d' in sys.modules)\n"
        "print('Line2D properties listed:', 'drawstyle' in (Line2D.set.__doc__ or ''))\n"
        "print('kwdoc restored:', 'drawstyle' in matplotlib.artist.kwdoc(Line2D))\n"
        f"c = dict(np.load({str(tmp_path / 'curves.npz')!r}))\n"
        f"plots.plot_reward_curves(c, {str(tmp_path / 'child.png')!r}, smooth=20, tight=False)\n"
        "import mpl_toolkits.mplot3d\n"
        "print('3d importable after:', True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "3d loaded: False" in out
    assert "Line2D properties listed: False" in out
    assert "kwdoc restored: True" in out
    assert "3d importable after: True" in out
    plot_reward_curves(curves, tmp_path / "here.png", smooth=20, tight=False)
    assert (tmp_path / "child.png").read_bytes() == (tmp_path / "here.png").read_bytes()


def test_a_matplotlib_that_needs_the_3d_toolkit_is_imported_whole() -> None:
    # Stand-in for another matplotlib version whose projections module fails to import without
    # mpl_toolkits.mplot3d: the plot process then imports matplotlib as it is, and can draw.
    probe = (
        "import sys\n"
        "from importlib.abc import MetaPathFinder\n"
        "class NeedsToolkit(MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib.projections' and sys.modules.get(\n"
        "                'mpl_toolkits.mplot3d', 0) is None:\n"
        "            raise ImportError('this matplotlib needs mpl_toolkits.mplot3d')\n"
        "sys.meta_path.insert(0, NeedsToolkit())\n"
        "from marlm.eval import plots\n"
        "plots._import_matplotlib()\n"
        "fig = plots._figure((2, 2))\n"
        "print('3d loaded:', 'mpl_toolkits.mplot3d' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "3d loaded: True" in out


def test_a_gif_stream_writes_each_frame_as_it_comes(tmp_path: Path) -> None:
    # The demo kept every frame in memory (200 steps on a 64x64 map: 4.2 GB); a stream holds one.
    from marlm.eval.gif import GifStream

    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (7, 11, 3), dtype=np.uint8) for _ in range(9)]
    frames[4][:] = (10, 200, 30)  # one colour: exact after quantisation
    path = tmp_path / "episode.gif"
    with GifStream.for_frames(path, 9, fps=4, max_frames=5) as gif:  # every 2nd frame
        sizes = []
        for f in frames:
            gif.append(f)
            sizes.append(gif.tmp.stat().st_size if gif.tmp.exists() else 0)
        assert not path.exists() and len(gif) == 5
        assert gif.finish() == path
    assert sizes[1] == sizes[0] < sizes[2]  # a kept frame is on disk at once; a skipped one not
    assert not gif.tmp.exists()
    with Image.open(path) as im:
        assert im.n_frames == 5 and im.size == (11, 7) and im.info["duration"] == 250
        assert im.info["loop"] == 0
        im.seek(2)  # the stream's third frame: frames[4]
        assert im.convert("RGB").getpixel((3, 3)) == (10, 200, 30)


def test_a_gif_stream_that_fails_leaves_no_file(tmp_path: Path) -> None:
    import errno

    from marlm.eval.gif import GifStream

    path = tmp_path / "episode.gif"
    gif = GifStream(path)
    gif.append(np.zeros((4, 4, 3), np.uint8))

    class Full:
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device", str(gif.tmp))

        def close(self):
            pass

    gif._file.close()
    gif._file = Full()
    gif.append(np.zeros((4, 4, 3), np.uint8))  # never raises mid-run
    assert gif.error is not None and not gif.tmp.exists()
    with pytest.raises(OSError, match="No space left"):
        gif.finish()
    assert not path.exists() and not gif.tmp.exists()
