"""Option values ``marlm demo`` refuses before the run's modules load: ``--executor``,
``--scenario``, ``--orders``, ``--order-every`` and ``--policy`` are answered without importing
the controller, numba, scipy or the environment (importing them took 4-5 s of a refusal that
other options answer in a tenth of a second). Checked by what the process imported, in a fresh
interpreter, not by a clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numba", "scipy.optimize", "scipy.sparse", "gymnasium", "marlm.hybrid.controller",
         "marlm.envs.warehouse", "marlm.experiments.congested")  # fmt: skip
PROBE = """
import json, sys
heavy = json.loads(sys.argv[2])
sys.argv = ["marlm", *json.loads(sys.argv[1])]
from marlm.cli import main
try:
    main()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "heavy": [m for m in heavy if m in sys.modules]}))
"""


@pytest.mark.parametrize(
    "args, field",
    [
        (["--executor", "nope"], "--executor"),
        (["--scenario", "nope"], "--scenario"),
        (["--orders", "/no/such/orders.jsonl"], "--orders"),
        (["--order-every", "5"], "--order-every"),
        (["--executor", "greedy", "--policy", "q.npz"], "--policy"),
    ],
)
def test_a_refused_option_value_loads_none_of_the_runs_modules(tmp_path, args, field):
    argv = ["demo", *args, "--out", str(tmp_path / "run")]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["code"] == 2 and f"field '{field}'" in proc.stderr, proc.stderr
    assert got["heavy"] == [], got
