"""Commands: ``marlm bench`` (speed figures, each against a baseline measured in the same run)."""

from __future__ import annotations

from typing import Annotated

import typer

from marlm.experiments.settings import comma_list

from .app import SEED_BOUND, app


@app.command("bench")
def bench(
    quick: Annotated[
        bool, typer.Option("--quick", help="Shorter runs (each benchmark well under a minute).")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(
            "--only", help="Comma-separated subset of: env, shield, pibt, planner, train."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of every benchmark.", callback=SEED_BOUND)
    ] = 0,
) -> None:
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
