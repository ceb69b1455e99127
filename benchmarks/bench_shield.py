"""The local shield's ms per step at 10..200 robots on a 64x64 map, vs the dict-based reference.

Run: `python benchmarks/bench_shield.py [--quick]`. Prints the figure, its baseline measured in the
same run, and the ratio. The reference is the first, dict-based version of the local shield
(``tests/hybrid/rules/reference_shield.py``), which the equivalence test also uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

from marlm.scale.benchmarks import Figure, large_layout, shield_ms

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "hybrid" / "rules"))
from reference_shield import ReferenceShield  # noqa: E402


def bench_shield(quick: bool = False, seed: int = 0) -> Figure:
    """Median ms per :meth:`Shield.filter` step at 10..200 robots on a 64 x 64 map."""
    from marlm.hybrid.rules.shield import Shield

    layout = large_layout()
    counts = (10, 25, 50, 100, 200)
    steps = 100 if quick else 400
    fast_all = {n: shield_ms(Shield, layout, n, steps, seed) for n in counts}
    ref_all = {n: shield_ms(ReferenceShield, layout, n, max(20, steps // 4), seed) for n in counts}
    fast = {n: v[0] for n, v in fast_all.items()}
    ref = {n: v[0] for n, v in ref_all.items()}
    growth = fast[200] / fast[10]
    return Figure(
        name=f"shield at 200 robots ({layout.height}x{layout.width} map, crowding to stations)",
        value=fast[200],
        baseline=ref[200],
        unit="ms/step",
        ratio=fast[200],
        ratio_text="ms per step (median)",
        target="<= 1 ms, about linear growth",
        met=fast[200] <= 1.0,
        details={
            "ms/step by robots (compiled)": ", ".join(f"{n}: {fast[n]:.3f}" for n in counts),
            "ms/step by robots (reference)": ", ".join(f"{n}: {ref[n]:.2f}" for n in counts),
            "p99 ms/step at 200 (compiled / reference)": f"{fast_all[200][1]:.3f} / "
            f"{ref_all[200][1]:.2f}",
            "growth 10 -> 200 robots": f"{growth:.1f}x time for 20x robots "
            f"(reference {ref[200] / ref[10]:.1f}x)",
            "speed-up vs reference at 200": f"{ref[200] / fast[200]:.0f}x",
        },
    )


if __name__ == "__main__":
    print("\n".join(bench_shield(quick="--quick" in sys.argv[1:]).lines()))
