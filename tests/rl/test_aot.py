"""GridRace loops built ahead of time (marlm.rl.aot): the JIT's results, and never a bad module.

One module (IQL, plain credit) is built per test session: about 10 s of CPU (numba's compiler, then
the C compiler for its helper library). It is the session cache's own module (``marlm_cache``, built
there by the first GridRace run of the session, or here if none ran yet), copied into a temporary
cache for these tests. Every learner and credit family is compared under MARLM_SLOW=1 (five more
builds, about a minute of CPU).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marlm.envs.grid_dynamics import move_table
from marlm.rl import aot, fast
from marlm.rl.train import RACE_LOG_FIELDS, RaceConfig, train_race

SMALL = RaceConfig(episodes=300, seed=3)


@pytest.fixture(scope="session")
def built(tmp_path_factory, marlm_cache) -> Path:
    """A marlm cache folder holding the module of IQL with plain credit (the defaults'): a copy of
    the session cache's module, which the session's first GridRace run built (the same sources,
    so the same name); built into the session cache here when no run did yet."""
    session = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, marlm_cache / "aot")
    if not session.is_file():
        assert aot._build_in_child(fast.IQL, fast.PLAIN_CREDIT, session), "build failed"
    cache = tmp_path_factory.mktemp("marlm-cache")
    path = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, cache / "aot")
    path.parent.mkdir(parents=True)
    shutil.copy2(session, path)
    return cache


@pytest.fixture
def calls(monkeypatch) -> list[bool]:
    """What each ``run_race_loop`` call returned: True where the built module ran the loop."""
    out: list[bool] = []
    run = aot.run_race_loop

    def spy(*args):
        out.append(run(*args))
        return out[-1]

    monkeypatch.setattr(aot, "run_race_loop", spy)
    return out


def _jit(cfg: RaceConfig, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("MARLM_AOT", "0")
        return train_race(cfg)


def assert_same_run(a, b) -> None:
    for name in a.tables:
        np.testing.assert_array_equal(a.tables[name], b.tables[name])
    for f in RACE_LOG_FIELDS:
        np.testing.assert_array_equal(getattr(a.log, f), getattr(b.log, f))
    assert a.rng.bit_generator.state == b.rng.bit_generator.state


def test_the_built_loop_gives_the_jits_tables_logs_and_generator_state(built, calls, monkeypatch):
    monkeypatch.setenv("MARLM_CACHE", str(built))
    cfg = RaceConfig(episodes=300, seed=3, end="all")
    ahead = train_race(cfg)
    assert calls and all(calls)  # the module ran every chunk
    calls.clear()
    assert_same_run(ahead, _jit(cfg, monkeypatch))
    assert calls == [False]  # MARLM_AOT=0: the JIT ran it


def test_a_run_with_a_built_loop_never_imports_numba(built):
    probe = (
        "import sys\n"
        "from marlm.rl.train import RaceConfig, train_race\n"
        "train_race(RaceConfig(episodes=20))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))\n"
    )
    env = {**os.environ, "MARLM_CACHE": str(built)}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]"]


def test_a_damaged_module_is_built_again(tmp_path, built, calls, monkeypatch):
    # A cache entry cut short or empty was never rebuilt: every run fell back to the JIT.
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path))
    path = aot.module_path(fast.IQL, fast.PLAIN_CREDIT)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x7fELF and then nothing of a shared library")
    good = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, built / "aot")
    builds = []

    def build(kind, family, target):  # the run's build, here a copy of the session's module
        builds.append(target)
        shutil.copy(good, target)
        return True

    monkeypatch.setattr(aot, "_build_in_child", build)
    ran = train_race(SMALL)
    assert builds == [path] and calls == [True]
    assert path.read_bytes() == good.read_bytes()
    assert_same_run(ran, _jit(SMALL, monkeypatch))


def test_a_module_that_still_does_not_load_is_noted_and_left_to_the_jit(
    tmp_path, calls, monkeypatch
):
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path))
    path = aot.module_path(fast.IQL, fast.PLAIN_CREDIT)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    builds = []
    monkeypatch.setattr(
        aot, "_build_in_child", lambda k, f, t: builds.append(t) or t.write_bytes(b"") or True
    )
    ran = train_race(SMALL)
    assert calls == [False] and len(builds) == 1
    assert not path.exists() and aot._failure_note(path).is_file()
    assert_same_run(ran, _jit(SMALL, monkeypatch))


def test_a_failed_build_falls_back_to_the_jit_and_is_not_tried_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path))
    monkeypatch.setattr(aot.sys, "executable", "/bin/false")  # the child fails at once
    tries = []
    build = aot._build_in_child
    monkeypatch.setattr(aot, "_build_in_child", lambda *a: tries.append(a) or build(*a))
    assert_same_run(train_race(SMALL), _jit(SMALL, monkeypatch))
    assert len(tries) == 1
    path = aot.module_path(fast.IQL, fast.PLAIN_CREDIT)
    assert not path.exists() and "exit 1" in aot._failure_note(path).read_text()
    train_race(SMALL)
    assert len(tries) == 1  # the note stops a second try


def test_a_cache_that_cannot_be_written_is_left_alone(tmp_path, calls, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MARLM_CACHE", str(blocked))  # <file>/aot cannot be made
    monkeypatch.setattr(aot, "_build_in_child", lambda *a: pytest.fail("tried to build"))
    train_race(SMALL)
    assert calls == [False]


def test_a_module_built_from_other_sources_or_versions_has_another_name(tmp_path, monkeypatch):
    here = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, tmp_path)
    copy = tmp_path / "marlm"
    for rel in aot._SOURCES:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes((aot._PACKAGE / rel).read_bytes())
    monkeypatch.setattr(aot, "_PACKAGE", copy)
    try:
        aot._key.cache_clear()
        assert aot.module_path(fast.IQL, fast.PLAIN_CREDIT, tmp_path) == here  # same bytes
        with (copy / "rl/kernels.py").open("a") as f:
            f.write("# edited\n")
        aot._key.cache_clear()
        edited = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, tmp_path)
        monkeypatch.setattr(aot, "_PACKAGE", aot._PACKAGE)
        monkeypatch.setattr(np, "__version__", "0.0.0")
        aot._key.cache_clear()
        other_numpy = aot.module_path(fast.IQL, fast.PLAIN_CREDIT, tmp_path)
    finally:
        aot._key.cache_clear()
    assert len({here, edited, other_numpy}) == 3
    assert here != aot.module_path(fast.VDN, fast.PLAIN_CREDIT, tmp_path)


def _race_args() -> tuple:
    e, t = 3, 4
    q = [np.zeros((25 * 25, 5)) for _ in range(2)] + [np.zeros((1, 5)) for _ in range(2)]
    return (
        *q, move_table(5), 24, 25, t, True, fast.SHARED, 0.0, True, True, np.full((e, 2), 0.1),
        np.full(e, 0.05), 0.95, np.random.default_rng(0), np.zeros((e, 2)), np.zeros((e, 2)),
        np.zeros(e), np.zeros(e, dtype=np.int64), np.zeros((e, 2), dtype=bool),
        np.zeros((e, 2, 5), dtype=np.int64), np.full((e, 2, t), -1, dtype=np.int8),
    )  # fmt: skip


def _read_only(shape) -> np.ndarray:
    out = np.zeros(shape)
    out.setflags(write=False)
    return out


@pytest.mark.parametrize(
    ("position", "value"),
    [
        (0, np.zeros((625, 5), dtype=np.float32)),  # another dtype
        (0, np.zeros((5, 625)).T),  # not C-contiguous
        (0, np.zeros((625, 5, 1))),  # another number of dimensions
        (17, _read_only((3, 2))),  # a log the loop could not write
        (10, np.float32(0.0)),  # the JIT would compile a float32 loop
        (10, 0),  # an int, where the JIT would compile an int64 loop
        (5, 24.0),
        (16, np.random.RandomState(0)),
    ],
)
def test_arguments_of_other_types_than_the_module_takes_are_left_to_the_jit(position, value):
    args = list(_race_args())
    assert aot._converted(tuple(args)) is not None
    args[position] = value
    assert aot._converted(tuple(args)) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting",
    [
        {"learner": "iql", "reward": "mixed"},
        {"learner": "iql", "reward": "difference", "counterfactual": "average"},
        {"learner": "vdn", "reward": "shared"},  # vdn learns from the team reward only
        {"learner": "jal", "reward": "individual"},
        {"learner": "jal", "reward": "difference", "counterfactual": "absent"},
    ],
    ids=lambda s: "-".join(s.values()),
)
def test_every_learner_and_credit_family_built_gives_the_jits_run(
    setting, tmp_path_factory, calls, monkeypatch
):
    if os.environ.get("MARLM_SLOW") != "1":
        pytest.skip("slow (a build per learner and family); set MARLM_SLOW=1")
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path_factory.getbasetemp() / "marlm-cache-all"))
    cfg = RaceConfig(**setting, episodes=200, seed=1)
    assert_same_run(train_race(cfg), _jit(cfg, monkeypatch))
    assert calls[0]
