"""Notes per second the triage probe sustains, embedded and through ``marlm llm serve``, against
the arrival rate of a stream ten times the demo's ``medium`` one; for sizing a warehouse.

Each configuration classifies the 44 held stream notes (``benchmarks/data/held_stream_notes.jsonl``)
``--rounds`` times over, ``--batch`` notes a request, with a warm probe (pool states cached), and
reports notes per second of wall time, CPU milliseconds per note in this process (the embedded
rows; the server's CPU is in its own process), and the unread backlog a stream of
``--rate`` notes per second would leave after one minute. Configurations:

- ``embedded l_out-9``: the default (early exit, one thread, :mod:`marlm.llm.backends.layers`);
- ``embedded final``: the final states (the probe before the early exit; what a server gives);
- ``served l_out-9, batch B``: ``marlm llm serve`` on loopback (one thread), the probe over
  ``/v1/embeddings`` (the early-exit name) with B notes a request; ``served final``: the same
  server's final states (what a server without the early exit gives).

``medium`` brings one order every 1.2 steps at the 40 ms tick: 20.8 notes a second; ten times
that is 208 notes a second (the default ``--rate``).

    python benchmarks/reading_rate.py [--rounds 2] [--batch 8] [--rate 208.3] [--no-server]

Speed lives here, never in tests; the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from marlm.llm.backends import EmbeddedModel, OpenAICompatible
from marlm.llm.triage import Triage
from marlm.llm.triage.probe import ProbeMode

HELD = Path(__file__).resolve().parent / "data" / "held_stream_notes.jsonl"
MEDIUM_RATE = 1 / (1.2 * 0.040)  # notes a second: one order every 1.2 steps of 40 ms


def _notes() -> list[str]:
    return [json.loads(s)["note"] for s in HELD.read_text().splitlines() if s.strip()]


def _rate(tri: Triage, notes: list[str], rounds: int, batch: int) -> tuple[float, float]:
    """(notes per second of wall time, CPU ms per note in this thread), cache off."""
    tri.warm_up()
    n, wall, cpu = 0, 0.0, 0.0
    for r in range(rounds):
        # a distinct text each round: the classifier's own cache would answer repeats
        texts = [f"{x} (round {r})" for x in notes]
        for k in range(0, len(texts), batch):
            part = texts[k : k + batch]
            w, c = time.perf_counter(), time.thread_time()
            tri.classify_many(part)
            wall += time.perf_counter() - w
            cpu += time.thread_time() - c
            n += len(part)
    return n / wall, 1e3 * cpu / n


def _serve() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"from marlm.llm.server import serve; serve(host='127.0.0.1', port={port}, n_threads=1)"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(base + "/models", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("marlm llm serve did not start within 120 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rate", type=float, default=10 * MEDIUM_RATE)
    ap.add_argument("--no-server", action="store_true")
    args = ap.parse_args()
    notes = _notes()
    cache = Path(os.environ.get("MARLM_CACHE") or Path.home() / ".cache" / "marlm")
    rows = []
    model = EmbeddedModel(n_threads=1)
    for name, layer in (("embedded l_out-9", 9), ("embedded final", None)):
        tri = Triage(model, mode="probe", cache_dir=cache)
        tri._as(ProbeMode).layer = layer
        rows.append((name, *_rate(tri, notes, args.rounds, 1)))
    if not args.no_server:
        proc, base = _serve()
        try:
            server = OpenAICompatible(base, "smollm2", timeout_s=120)
            for name, layer, b in (
                ("served l_out-9, batch 1", 9, 1),
                (f"served l_out-9, batch {args.batch}", 9, args.batch),
                (f"served final, batch {args.batch}", None, args.batch),
            ):
                tri = Triage(server, mode="probe", cache_dir=cache)
                tri._as(ProbeMode).layer = layer
                rows.append((name, *_rate(tri, notes, args.rounds, b)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    load = os.getloadavg()
    print(f"arrivals: {args.rate:.1f} notes/s ({args.rate / MEDIUM_RATE:.0f} x medium)")
    print("| configuration | notes/s | CPU ms/note (this process) | unread after 60 s |")
    print("| --- | --- | --- | --- |")
    for name, rate, cpu in rows:
        backlog = max(0.0, (args.rate - rate) * 60)
        print(f"| {name} | {rate:.1f} | {cpu:.1f} | {backlog:,.0f} |")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cores {os.cpu_count()}")
    need = {name: int(np.ceil(args.rate / rate)) for name, rate, _ in rows if rate > 0}
    print(
        "reading threads of this CPU to keep up: " + ", ".join(f"{k} {v}" for k, v in need.items())
    )


if __name__ == "__main__":
    main()
