"""How far README's model-dependent examples are from printing something else.

Runs each ```python block of README's section on the LLM-agent line (the blocks that
``tests/llm/test_readme_examples.py`` checks) in this process, on the embedded model, and records
every greedy step of every grammar-constrained decode: the token chosen and the best token the
grammar also allowed. The gap between their logits is the log-probability margin of that step
(both share one softmax); a step whose margin is below the difference that another CPU build of
llama.cpp makes in the logits can decode otherwise there, and everything after it with it. That
difference was not measured across CPUs; on this AVX2 machine a native and a ``GGML_NATIVE=OFF``
build give the same logits bit for bit (``--dump`` on one, ``--compare`` on the other), and
``--n-batch 8`` (another split of the prompts into decode batches) moves them by up to 0.48 and
the margins of the examples' steps by up to 0.33, without changing a token.

Prints, per example, its output, the number of decodes and steps, the smallest margins with the
text decoded so far, and for ``LLMReward`` the margin of each sample's score (``-1``, ``0``,
``1``: the chosen one against the best other).

    .venv/bin/python benchmarks/readme_margins.py [--top 5]

It patches llama-cpp-python's sampler chain (``llama_cpp._internals.LlamaSampler.add_greedy``,
0.3.x) to read the logits after the grammar's mask; another version may need another hook.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SECTION = "### The LLM-agent line: `ToolAgent`, `Team`, `LLMReward`"
NAMES = ("ToolAgent", "Team", "LLMReward")

#: Allowed tokens kept per step, best first.
TOP = 8
#: One list per decode, one list per step: the best allowed (token id, logit), the chosen first.
DECODES: list[list[list[tuple[int, float]]]] = []
LLAMAS: list = []


def install_recorder(n_batch: int | None = None) -> None:
    """Add a step recorder before the greedy pick of every sampler chain llama-cpp-python builds;
    the grammar's mask (``-inf`` for tokens it rejects) is applied by then. ``n_batch`` replaces
    the prompt batch size of every model made (see ``--n-batch``)."""
    import llama_cpp
    from llama_cpp import _internals
    from llama_cpp.llama import Llama

    original_greedy = _internals.LlamaSampler.add_greedy
    original_init = Llama._init_sampler

    def init_sampler(self, *args, **kwargs):
        if not LLAMAS or LLAMAS[-1] is not self:
            LLAMAS.append(self)
        DECODES.append([])
        return original_init(self, *args, **kwargs)

    def record(cur_p) -> None:
        size = cur_p.contents.size
        data = (llama_cpp.llama_token_data * size).from_address(
            ctypes.addressof(cur_p.contents.data.contents)
        )
        arr = np.frombuffer(
            data, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)])
        )
        logits = arr["logit"]
        order = np.argsort(-logits, kind="stable")[:TOP]
        DECODES[-1].append(
            [(int(arr["id"][i]), float(logits[i])) for i in order if np.isfinite(logits[i])]
        )

    def add_greedy(self):
        self.add_custom(record)
        original_greedy(self)

    _internals.LlamaSampler.add_greedy = add_greedy
    Llama._init_sampler = init_sampler
    if n_batch is not None:
        original_llama_init = Llama.__init__

        def llama_init(self, *args, **kwargs):
            kwargs["n_batch"] = n_batch
            original_llama_init(self, *args, **kwargs)

        Llama.__init__ = llama_init


def examples() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(SECTION)[1].split("\n### ")[0].split("\n## ")[0]
    found = re.findall(r"```python\n(.*?)```\s*\n```text\n(.*?)```", section, flags=re.S)
    return [code for code, _ in found]


def piece(llm, token: int) -> str:
    if token < 0:
        return "(none)"
    return llm.detokenize([token]).decode("utf-8", errors="replace")


def score_class(piece_text: str) -> int | None:
    """The score a piece written after ``"score"`` commits to, or ``None`` if it commits to none
    yet (``:``, spaces)."""
    rest = piece_text.replace(":", "").strip()
    if not rest:
        return None
    return -1 if rest.startswith("-") else int(rest[0]) if rest[0] in "01" else None


def score_margin(llm, decode) -> tuple[int | None, float, str]:
    """The score a sample wrote and its margin: over the steps from the one after ``"score"`` to
    the one that writes the digit, the smallest gap between the chosen token and the best token
    that would commit to another score or to none yet (``' '`` then ``'1'`` against ``' -'`` then
    ``'1'``: a space and a minus come in several tokens; ``'-'`` against ``' -'`` is no choice of
    score)."""
    whole = "".join(piece(llm, step[0][0]) for step in decode)
    m = re.search(r'"score"\s*:\s*(-?\d)', whole)
    if not m:
        return None, float("nan"), whole
    final = int(m.group(1))
    text, worst = "", (float("inf"), "no other choice")
    for step in decode:
        if re.search(r'"score"\s*:\s*(-?\d)', text):
            break
        deciding = '"score"' in text
        chosen = piece(llm, step[0][0])
        text += chosen
        if not deciding:
            continue
        for tok, logit in step[1:]:
            if score_class(piece(llm, tok)) == final:
                continue  # the same score written another way
            gap = step[0][1] - logit
            if gap < worst[0]:
                worst = (gap, f"{chosen!r} over {piece(llm, tok)!r}")
            break
    return final, worst[0], worst[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=5, help="smallest margins shown per example")
    ap.add_argument("--only", choices=NAMES, help="one example")
    ap.add_argument("--dump", type=Path, help="write every step's allowed logits here (JSON)")
    ap.add_argument(
        "--compare",
        type=Path,
        help="a --dump of another build: print the largest logit difference on the same tokens",
    )
    ap.add_argument(
        "--n-batch",
        type=int,
        help="prompt tokens per decode batch instead of the backend's 64: another split of a "
        "prompt sums some products in another order (which sizes move the logits depends on the "
        "prompts' lengths), "
        "a stand-in on one machine for the kernels of another CPU",
    )
    args = ap.parse_args()
    install_recorder(args.n_batch)
    for name, code in zip(NAMES, examples(), strict=True):
        if args.only and name != args.only:
            continue
        start = len(DECODES)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"<README {name}>", "exec"), {"__name__": "__readme__"})
        llm = LLAMAS[-1]
        decodes = DECODES[start:]
        print(f"== {name}: {len(decodes)} decodes, {sum(map(len, decodes))} steps")
        print("   " + out.getvalue().rstrip().replace("\n", "\n   "))
        steps = []
        for d, decode in enumerate(decodes):
            text = ""
            for step in decode:
                (tok, lt), rest = step[0], step[1:]
                if rest:
                    alt, la = rest[0]
                    steps.append((lt - la, d, text, piece(llm, tok), piece(llm, alt)))
                text += piece(llm, tok)
        for d, decode in enumerate(decodes):
            mine = [s for s in steps if s[1] == d]
            text = "".join(piece(llm, step[0][0]) for step in decode)
            low = min(mine, default=(float("inf"),))[0]
            print(f"   decode {d}: smallest margin {low:.3f} in {len(decode)} steps: {text!r}")
        steps.sort(key=lambda s: s[0])
        for margin, d, text, chosen, other in steps[: args.top]:
            print(
                f"   margin {margin:7.3f}  decode {d}: after {text[-40:]!r} "
                f"chose {chosen!r} over {other!r}"
            )
        if name == "LLMReward":
            for d, decode in enumerate(decodes):
                score, gap, how = score_margin(llm, decode)
                print(f"   sample {d}: score {score} by {gap:.3f} ({how})")
    if args.dump:
        args.dump.write_text(json.dumps(DECODES), encoding="utf-8")
    if args.compare:
        compare(json.loads(args.compare.read_text(encoding="utf-8")))
    return 0


def compare(other: list) -> None:
    """The largest difference between this run's logits and ``other``'s on the tokens both
    recorded, up to the first step where they chose differently."""
    worst, n = 0.0, 0
    for d, (mine, theirs) in enumerate(zip(DECODES, other, strict=False)):
        for s, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            if a[0][0] != b[0][0]:
                print(f"decode {d} step {s}: chose token {a[0][0]} here, {b[0][0]} there")
                break
            there = dict((int(t), v) for t, v in b)
            for tok, logit in a:
                if tok in there:
                    worst, n = max(worst, abs(logit - there[tok])), n + 1
    print(f"largest logit difference on {n} shared (step, token) pairs: {worst:.4g}")


if __name__ == "__main__":
    sys.exit(main())
