"""``benchmarks/pogema/run.sh``: creates ``--out``'s folder, runs the script named first
(README's ``run.sh evaluate.py ...``) in POGEMA's environment, and its report on the rows.

POGEMA's environment is stood in for by a folder whose ``bin/python`` records the script it was
asked to run and writes ``--out`` as the real scripts do (``open(out, "w")``: a missing folder
fails), so the shell script's own behaviour is what is tested, without POGEMA."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "pogema" / "run.sh"

STUB = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then exit 0; fi  # run.sh's check that pogema imports
script="$(basename "$1")"; shift
echo "$script $*" >> "$STUB_LOG"
if [ "$script" = report.py ]; then exit 0; fi
out=""
while [ $# -gt 0 ]; do
  case "$1" in --out) out="$2"; shift ;; --out=*) out="${1#--out=}" ;; esac
  shift
done
[ -n "$out" ] && python3 -c "import sys; open(sys.argv[1], 'w').write('{}\\\\n')" "$out"
"""


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(STUB)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {**os.environ, "MARLM_POGEMA_VENV": str(venv), "STUB_LOG": str(log)}
    proc = subprocess.run(["bash", str(RUN), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    return proc, log.read_text().splitlines() if log.exists() else []


def test_out_in_a_folder_that_does_not_exist_is_created(tmp_path):
    out = tmp_path / "new" / "deeper" / "results.jsonl"
    proc, calls = _run(tmp_path, "--agents", "32", "--seeds", "0", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    assert [c.split()[0] for c in calls] == ["harness.py", "report.py"]


def test_a_script_named_first_runs_in_the_same_environment(tmp_path):
    out = tmp_path / "eval" / "eval.jsonl"
    proc, calls = _run(tmp_path, "evaluate.py", "--agents", "128", f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == f"evaluate.py --agents 128 --out={out}" and out.is_file()
    assert calls[1] == f"report.py {out}"
    proc, calls = _run(tmp_path, "nope.py", "--out", str(out))
    assert proc.returncode == 2 and "no script nope.py" in proc.stderr


def test_readmes_pogema_command_goes_through_run_sh():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"`(benchmarks/pogema/[^`]*\.(?:py|sh)[^`]*)`", readme)
    runs = [c for c in commands if "--out" in c]
    assert runs and all(c.startswith("benchmarks/pogema/run.sh ") for c in runs), runs
