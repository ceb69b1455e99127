"""What a note costs the reading worker: wall and worker-thread CPU time a note of the embedded
probe, alone, beside a 40 ms-tick Python loop (the demo's control thread, about 2 ms of Python a
tick) and beside a busy Python thread (whether the GIL holds the reading back). Notes from
``benchmarks/data/held_stream_notes.jsonl``, 12 per case, one request each.

    python benchmarks/reading_cost.py
"""

import json
import threading
import time
from pathlib import Path

from marlm.hybrid.build import cache_dir
from marlm.llm.backends import make_backend
from marlm.llm.triage import Triage

HELD = Path(__file__).parent / "data" / "held_stream_notes.jsonl"


def main() -> None:
    lines = HELD.read_text(encoding="utf-8").splitlines()
    notes = [json.loads(line)["note"] for line in lines][:36]
    triage = Triage(make_backend("embedded"), mode="probe", cache_dir=cache_dir())
    triage.classify_many(["warm up note"], fallbacks=["normal"])

    def run(label: str, part: list[str]) -> None:
        w0, c0 = time.perf_counter(), time.thread_time()
        for n in part:
            triage.classify_many([n], fallbacks=["normal"])
        w, c = time.perf_counter() - w0, time.thread_time() - c0
        print(f"{label}: wall {1e3 * w / len(part):.0f} ms/note, "
              f"worker CPU {1e3 * c / len(part):.0f} ms/note", flush=True)  # fmt: skip

    stop = threading.Event()

    def ticker(busy: bool) -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < (1.0 if busy else 0.002) and not stop.is_set():
                sum(range(200))
            if not busy:
                time.sleep(0.038)

    run("alone", notes[:12])
    for busy, label, part in (
        (False, "beside a 40 ms tick (2 ms Python a tick)", notes[12:24]),
        (True, "beside a busy Python thread", notes[24:36]),
    ):
        stop.clear()
        th = threading.Thread(target=ticker, args=(busy,))
        th.start()
        run(label, part)
        stop.set()
        th.join()


if __name__ == "__main__":
    main()
