"""README's "Layout of the code" names every module of ``src/marlm``, each in its own folder.

The layout block is a tree: two spaces of indent a level, a folder ends with ``/``, a line lists
one or more files (``a.py, b.py``) before its description (two or more spaces). The test reads the
tree into paths and compares them with the files, both ways, so a module added, moved or removed
without its line fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import marlm

ROOT = Path(__file__).resolve().parent.parent
SRC = Path(marlm.__file__).parent
_NAME = re.compile(r"^(?:[\w.]+\.py|\w+/)$")


def layout_block(readme: str) -> list[str]:
    """The lines of the ``src/marlm/`` tree in README's layout section."""
    section = readme.split("## Layout of the code", 1)[1]
    block = section.split("```", 2)[1].splitlines()
    start = block.index("src/marlm/")
    lines = []
    for line in block[start + 1 :]:
        if line and not line.startswith(" "):
            break
        lines.append(line)
    return lines


def documented_paths(lines: list[str]) -> set[str]:
    """``hybrid/rules/pibt.py``-style paths named by the tree ``lines`` (continuations skipped)."""
    folders: list[str] = []
    paths = set()
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        names = [n.strip() for n in re.split(r"\s{2,}", line.strip())[0].split(",")]
        if not line.strip() or not all(_NAME.match(n) for n in names):
            continue  # a description's continuation line
        depth = indent // 2 - 1
        del folders[depth:]
        for name in names:
            if name.endswith("/"):
                folders.append(name.rstrip("/"))
            else:
                paths.add("/".join([*folders, name]))
    return paths


def module_paths() -> set[str]:
    return {
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if not (p.name == "__init__.py" and p.parent != SRC)
    }


def test_the_layout_section_names_every_module_and_only_modules_that_exist():
    documented = documented_paths(layout_block((ROOT / "README.md").read_text(encoding="utf-8")))
    actual = module_paths()
    assert sorted(actual - documented) == [], "modules missing from README's layout section"
    assert sorted(documented - actual) == [], "README's layout section names modules that are gone"


def test_the_tree_reader_places_files_in_their_folders():
    lines = [
        "  a.py, b.py        two files",
        "                    a continuation line",
        "  hybrid/           a folder",
        "    rules/            its sub-folder",
        "      pibt.py           a module",
        "    controller.py     back one level",
    ]
    assert documented_paths(lines) == {
        "a.py",
        "b.py",
        "hybrid/rules/pibt.py",
        "hybrid/controller.py",
    }
