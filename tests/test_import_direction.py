"""The import direction of the README's "Layout of the code", checked on every module's source.

Every ``import marlm...`` / ``from marlm... import`` of every module under ``src/marlm`` (top
level, inside functions, under ``TYPE_CHECKING``, relative imports resolved) is read with
:mod:`ast`; an import of a package a layer may not use fails the test with the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import marlm

SRC = Path(marlm.__file__).parent

#: Package of marlm -> the other packages of marlm it may import. The order is the layering:
#: ``errors``, ``outcomes`` < ``envs``, ``llm`` < ``rl`` < ``eval`` < ``hybrid`` < ``scale`` <
#: ``experiments`` < ``cli``; nothing imports upwards. ``envs`` and ``llm`` import nothing of
#: marlm but its errors (not even the outcome vocabulary).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "outcomes": set(),
    "stops": set(),
    "envs": {"errors"},
    "llm": {"errors"},
    "rl": {"errors", "outcomes", "envs"},
    "eval": {"errors", "outcomes", "envs", "llm", "rl"},
    "hybrid": {"errors", "outcomes", "envs", "llm", "rl", "eval"},
    "scale": {"errors", "outcomes", "envs", "llm", "rl", "eval", "hybrid"},
    "experiments": {"errors", "outcomes", "envs", "llm", "rl", "eval", "hybrid", "scale"},
    "cli": {
        "errors",
        "outcomes",
        "stops",
        "envs",
        "llm",
        "rl",
        "eval",
        "hybrid",
        "scale",
        "experiments",
    },  # fmt: skip
    "__init__": set(),
    "__main__": {"cli"},
}

#: Modules of ``envs`` that ``rl`` may import: only the grid worlds, whose transition function
#: the compiled loops share (``envs.grid_dynamics.race_transition``, re-exported by ``envs.grid``),
#: never the warehouse's internals.
RL_MAY_IMPORT_FROM_ENVS = {"marlm.envs.grid", "marlm.envs.grid_dynamics"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts)


def imports_in(text: str, module: str) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import of marlm in ``text``, the source of
    ``module`` (``marlm.hybrid.controller``; a package's own file is ``marlm.hybrid.__init__``)."""
    package = module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if not node.level:
                out.append((node.lineno, node.module or ""))
                continue
            base = ".".join(package[: len(package) - node.level + 1])
            if node.module is None:  # from . import x: x is a module of that package
                out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, f"{base}.{node.module}"))
    return [(line, m) for line, m in out if m == "marlm" or m.startswith("marlm.")]


def marlm_imports(path: Path) -> list[tuple[int, str]]:
    return imports_in(path.read_text(encoding="utf-8"), module_name(path))


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


MODULES = sorted(SRC.rglob("*.py"))


def test_every_package_has_a_rule():
    packages = {layer_of(module_name(p)) for p in MODULES}
    assert packages <= set(ALLOWED), f"add the new package(s) to ALLOWED: {packages - set(ALLOWED)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_follow_the_documented_direction(path: Path):
    own = layer_of(module_name(path))
    wrong = []
    for line, module in marlm_imports(path):
        target = layer_of(module)
        if target == own or (target == "__init__" and own == "__init__"):
            continue
        if target not in ALLOWED[own]:
            wrong.append(f"{path.relative_to(SRC)}:{line} imports {module} ({own} -> {target})")
        elif own == "rl" and target == "envs" and module not in RL_MAY_IMPORT_FROM_ENVS:
            wrong.append(f"{path.relative_to(SRC)}:{line}: rl may import only the grid worlds")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


#: Sub-package of ``marlm.hybrid`` -> the other sub-packages it may import. ``core`` is the floor
#: under the three layers (the step view, actions, the map's tables); a layer imports ``core`` and
#: never a sibling layer. The modules at ``hybrid``'s top (controller, build, evaluate, simulator,
#: render, defaults) compose the layers and may import all of them.
HYBRID_LAYERS: dict[str, set[str]] = {
    "core": set(),
    "planning": {"core"},
    "acting": {"core"},
    "rules": {"core"},
}


def hybrid_layer_of(module: str) -> str | None:
    """``"core"``, ``"planning"``, ``"acting"``, ``"rules"`` for a module inside one of them,
    None for ``marlm.hybrid``'s own top-level modules and anything outside ``hybrid``."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "hybrid" and parts[2] in HYBRID_LAYERS:
        return parts[2]
    return None


HYBRID_LAYER_MODULES = sorted(
    p for p in (SRC / "hybrid").rglob("*.py") if hybrid_layer_of(module_name(p)) is not None
)


def test_every_hybrid_sub_package_has_a_rule():
    found = {p.parent.name for p in (SRC / "hybrid").glob("*/__init__.py")}
    assert found == set(HYBRID_LAYERS), f"add the sub-package(s) to HYBRID_LAYERS: {found}"


@pytest.mark.parametrize(
    "path", HYBRID_LAYER_MODULES, ids=lambda p: str(p.relative_to(SRC / "hybrid"))
)
def test_no_hybrid_layer_imports_a_sibling_layer(path: Path):
    own = hybrid_layer_of(module_name(path))
    wrong = []
    for line, module in marlm_imports(path):
        if layer_of(module) != "hybrid":
            continue
        target = hybrid_layer_of(module)
        if target is None:  # hybrid's top (controller, build, ...) sits above the layers
            wrong.append(f"{path.relative_to(SRC)}:{line} imports {module} ({own} -> hybrid top)")
        elif target != own and target not in HYBRID_LAYERS[own]:
            wrong.append(f"{path.relative_to(SRC)}:{line} imports {module} ({own} -> {target})")
    assert not wrong, "imports between the layers of hybrid:\n" + "\n".join(wrong)


def test_the_layer_checker_can_fail():
    text = "from marlm.hybrid.rules.pibt import Pibt\nfrom ..core.view import StepView\n"
    found = imports_in(text, "marlm.hybrid.acting.probe")
    assert [hybrid_layer_of(m) for _, m in found] == ["rules", "core"]
    assert hybrid_layer_of("marlm.hybrid.controller") is None
    assert hybrid_layer_of("marlm.hybrid.acting") == "acting"


def test_hybrid_never_imports_scale_experiments_or_cli():
    # The one loop the layering once hid (hybrid.compare -> scale -> hybrid) must not come back.
    found = [
        f"{p.relative_to(SRC)}:{line} {m}"
        for p in (SRC / "hybrid").rglob("*.py")
        for line, m in marlm_imports(p)
        if layer_of(m) in ("scale", "experiments", "cli")
    ]
    assert found == []


def test_the_checker_sees_relative_and_lazy_imports():
    # The checker can fail: relative imports are resolved and imports inside functions count.
    text = "def f():\n    from ..scale import parallel\n    from . import shield\n"
    found = imports_in(text, "marlm.hybrid.probe")
    assert found == [(2, "marlm.scale"), (3, "marlm.hybrid.shield")]
    assert [layer_of(m) for _, m in found] == ["scale", "hybrid"]
    assert imports_in("from .planner import Plan", "marlm.hybrid.__init__") == [
        (1, "marlm.hybrid.planner")
    ]
