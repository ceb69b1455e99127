"""The training of ``train.py --workers N``, in marlm's own environment, where Ray runs.

``train.py`` (in POGEMA's environment) writes the episodes POGEMA generated to
``<run_dir>/instances.npz`` and the CMA-ES settings to ``<run_dir>/config.json``, then runs
``python train_ray.py RUN_DIR WORKERS`` here: each generation's candidates are simulated as Ray
tasks (``marlm.experiments.guidance_training.train(..., workers=N)``), with the serial run's
result, checkpoints and resume.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from marlm.experiments.guidance_training import TrainConfig, train
from marlm.hybrid.simulator import LifelongInstance


def load(run_dir: Path) -> tuple[list[LifelongInstance], np.ndarray, TrainConfig]:
    """The instances, target cells and config ``train.py`` wrote into ``run_dir``."""
    data = np.load(run_dir / "instances.npz")
    instances = [
        LifelongInstance(
            data[f"free_{k}"], data[f"starts_{k}"], data[f"targets_{k}"], int(steps), int(seed)
        )  # fmt: skip
        for k, (steps, seed) in enumerate(zip(data["steps"], data["seeds"], strict=True))
    ]
    config = json.loads((run_dir / "config.json").read_text())
    if config.get("mean0") is not None:
        config["mean0"] = tuple(config["mean0"])
    if config.get("search") is not None:
        config["search"] = tuple(config["search"])
    return instances, data["target_cells"], TrainConfig(**config)


def main(argv: list[str]) -> int:
    run_dir, workers = Path(argv[0]), int(argv[1])
    instances, target_cells, config = load(run_dir)
    t0 = time.process_time()

    def bar(gen: int, total: int, best: float, mean: float) -> None:
        done = int(30 * gen / total)
        print(
            f"\r[{'#' * done}{'.' * (30 - done)}] generation {gen}/{total}  best {best:.4f}  "
            f"mean {mean:.4f}  cpu (this process) {time.process_time() - t0:.0f}s",
            end="\n" if gen == total else "", file=sys.stderr, flush=True,
        )  # fmt: skip

    train(instances, run_dir, config, target_cells, progress=bar, workers=workers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
