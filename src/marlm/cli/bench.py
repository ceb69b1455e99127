"""Commands: ``marlm bench`` (speed figures, each against a baseline measured in the same run)."""

from __future__ import annotations

from marlm.experiments.settings import comma_list

from .app import SEED_BOUND, app, opt


@app.command("bench")
def bench(
    quick: bool = opt(False, "Shorter runs (each benchmark well under a minute).", None, "--quick"),
    only: str | None = opt(
        None, "Comma-separated subset of: env, pibt, planner, train.", None, "--only"),
    seed: int = opt(0, "Seed of every benchmark.", SEED_BOUND, "--seed"),
) -> None:  # fmt: skip
    """Speed benchmarks against same-run baselines.

    Prints each figure with its baseline measured in the same run and their ratio.
    """
    from marlm.scale.benchmarks import BENCHMARKS

    allowed = list(BENCHMARKS)
    names = comma_list(only, allowed, option="--only", what="benchmark") if only else allowed
    for name in names:
        try:
            figure = BENCHMARKS[name](quick=quick, seed=seed)
        except ModuleNotFoundError as e:
            print(f"{name}: skipped ({e.name} is not installed; pip install 'marlm[bench]')")
            continue
        print("\n".join(figure.lines()), flush=True)
