"""Two ways of reading instructions, measured on marlm's development set of instruction notes.

``probe``: heads on hidden states, 5-fold cross-validation over the development notes (the heads
are trained on four folds and read the fifth; urgency is the triage probe, which never saw these
notes). ``schema``: one grammar-constrained JSON answer per note over the candidates (no
training). Prints per-field accuracy, all-five-right and the model's time per note.

    flock /work/locks/cpu python benchmarks/instruction_modes.py [--modes probe,schema] [--C 0.05]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from marlm.hybrid.build import cache_dir
from marlm.llm.backends import make_backend
from marlm.llm.triage.candidates import find_candidates
from marlm.llm.triage.instructions import (
    FIELDS,
    Accuracy,
    InstructionReader,
    dev_set_path,
    load_instruction_notes,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="probe,schema")
    ap.add_argument("--C", type=float, default=None, help="heads' C (default: the shipped one)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--limit", type=int, default=0, help="schema: the first N notes only")
    a = ap.parse_args()
    model = make_backend("embedded")
    notes = load_instruction_notes(dev_set_path())
    for mode in a.modes.split(","):
        acc, spent, inputs = Accuracy(), [], []
        if mode == "probe":
            import marlm.llm.triage.instructions as ins

            if a.C is not None:
                ins.HEAD_C = a.C
            reader = InstructionReader(model, mode="probe", cache_dir=cache_dir())
            reader.fit(notes)  # every hidden state once, cached
            fold = np.arange(len(notes)) % a.folds
            for f in range(a.folds):
                train = [n for n, k in zip(notes, fold, strict=True) if k != f]
                reader._heads = reader.fit(train)
                for n, k in zip(notes, fold, strict=True):
                    if k != f:
                        continue
                    reader.stations = reader.stations_of(n)
                    t0 = time.perf_counter()
                    r = reader.read(n["note"], n["time"], n["id"])
                    spent.append(time.perf_counter() - t0)
                    inputs.append(r.model_inputs)
                    acc.add(r.instructions.as_dict(), n["label"])
        else:
            reader = InstructionReader(model, mode="schema", cache_dir=cache_dir())
            for n in notes[: a.limit or None]:
                reader.stations = reader.stations_of(n)
                t0 = time.perf_counter()
                r = reader.read(n["note"], n["time"], n["id"])
                spent.append(time.perf_counter() - t0)
                inputs.append(r.model_inputs)
                acc.add(r.instructions.as_dict(), n["label"])
        rates = acc.rates()
        cells = " ".join(f"{f}={rates[f]:.3f}" for f in (*FIELDS, "all"))
        print(f"{mode}: n={acc.n} {cells} time/note={1000 * np.mean(spent):.0f} ms "
              f"inputs/note={np.mean(inputs):.2f}")  # fmt: skip
    # the parser's ceiling: a field whose right value is no candidate cannot be read
    ceiling = Accuracy()
    for n in notes:
        c = find_candidates(n["note"], n["time"], InstructionReader.stations_of(reader, n), n["id"])
        best = {
            "urgency": n["label"]["urgency"],
            "cancel": n["label"]["cancel"] and bool(c.cancel),
            "deadline_min": next(
                (
                    v
                    for v in c.values("deadline")
                    if n["label"]["deadline_min"] is not None
                    and abs(v - n["label"]["deadline_min"]) <= 1
                ),
                None,
            ),  # fmt: skip
            "with": n["label"]["with"] if n["label"]["with"] in c.values("with") else None,
            "station": n["label"]["station"]
            if n["label"]["station"] in c.values("station")
            else None,
        }
        ceiling.add(best, n["label"])
    print("parser ceiling:", " ".join(f"{f}={v:.3f}" for f, v in ceiling.rates().items()))


if __name__ == "__main__":
    main()
