"""Grid maps of the multi-agent path finding field, for the lifelong scenario
(:mod:`marlm.envs.warehouse.lifelong`).

Two formats are read as :class:`GridMap` (free cells,
start cells, target cells; no shelves or stations) by :func:`parse_grid_map` / :func:`load_grid_map`,
for the lifelong scenario (:mod:`marlm.envs.warehouse.lifelong`):

POGEMA map strings (Skrynnik et al., "POGEMA: A Benchmark Platform for Cooperative Multi-Agent
Pathfinding", ICLR 2025; ``pogema.GridConfig(map=...)``)
    ``#`` obstacle, ``.`` free cell where agents may start and targets may be drawn, ``@`` free
    start cell, ``$`` free target cell, ``!`` free cell that is neither. Spaces are ignored; short
    rows are padded with obstacles.
MovingAI ``.map`` files (Sturtevant 2012, "Benchmarks for Grid-Based Pathfinding", the MAPF
benchmark format)
    a header ``type octile`` / ``height H`` / ``width W`` / ``map``, then H rows of W characters:
    ``.`` ``G`` and ``S`` (swamp) passable, ``@`` ``O`` ``T`` ``W`` obstacles. Every free cell is a
    start and a target cell (MovingAI keeps starts and goals in separate scenario files).

:func:`load_grid_map` reads marlm and RWARE maps too (see :func:`grid_map_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from marlm.envs.warehouse.layout import (
    _POGEMA_CHARS,
    Layout,
    _bfs,
    _FreeGrid,
    _grid_format,
    list_layouts,
    load_layout,
    parse_layout,
    read_map_text,
)
from marlm.errors import InputError, check_path_text

_MOVINGAI_PASSABLE = set(".GS")
_MOVINGAI_OBSTACLE = set("@OTW")
_MOVINGAI_HEADER = ("type", "height", "width", "map")


@dataclass(frozen=True, eq=False)
class GridMap(_FreeGrid):
    """A grid for multi-agent path finding: free cells, where agents start, where targets are drawn.

    Attributes:
        name: map name (file stem or given).
        free: bool[H, W], True where an agent may stand.
        starts: cells where agents may start, row-major, all free.
        targets: cells where targets may be drawn, row-major, all free.
        source: the file the map came from, or ``"<string>"``.
        format: ``"pogema" | "movingai" | "marlm" | "rware"``.
    """

    name: str
    free: np.ndarray
    starts: list[tuple[int, int]]
    targets: list[tuple[int, int]]
    source: str = "<string>"
    format: str = "pogema"
    _distance_cache: dict = field(default_factory=dict, repr=False)

    def components(self) -> np.ndarray:
        """int32[H, W]: connected-component label of every free cell (4-neighbour), -1 elsewhere;
        labels 0, 1, ... in row-major order of their first cell (cached, read-only)."""
        table = self._distance_cache.get("components")
        if table is None:
            table = np.full(self.free.shape, -1, dtype=np.int32)
            label = 0
            for r, c in np.argwhere(self.free):
                if table[r, c] < 0:
                    table[_bfs(self.free, [(int(r), int(c))]) >= 0] = label
                    label += 1
            table.flags.writeable = False
            self._distance_cache["components"] = table
        return table


def grid_map_of(layout: Layout) -> GridMap:
    """``layout`` as a :class:`GridMap` for the lifelong scenario: free cells as they are,
    starts = the cells joined to the stations (:meth:`Layout.joined_cells`) that are not
    stations, targets = the shelves' access cells and the stations (row-major, distinct)."""
    station_set = set(layout.stations)
    targets = sorted(set(layout.access.values()) | station_set)
    return GridMap(
        name=layout.name,
        free=layout.free,
        starts=[c for c in layout.joined_cells() if c not in station_set],
        targets=targets,
        source=layout.source,
        format="marlm",
    )


def parse_grid_map(text: str, name: str = "custom", source: str | Path = "<string>") -> GridMap:
    """Parse a POGEMA map string, a MovingAI ``.map`` file, or a marlm / RWARE warehouse map.

    The format is detected: a first line ``type <name>`` means MovingAI; only the characters
    ``. # @ $ !`` mean POGEMA; anything else is read by :func:`parse_layout` and converted with
    :func:`grid_map_of`. A text of only ``.`` and ``#`` reads as POGEMA (every free cell
    a start and a target cell).

    Raises:
        InputError: bad header, a row of the wrong width or count, an unknown character, or a map
            without a free start or target cell; the error names ``source``, the 1-based line and
            the field (``type``, ``height``, ``width``, ``map``).
    """
    source = str(source)
    lines = text.splitlines()
    kind = _grid_format(lines, strict=False)
    if kind == "MovingAI":
        grid = _parse_movingai(lines, source)
        fmt = "movingai"
        starts = targets = grid
    else:
        body = set("".join(lines).replace(" ", "").replace("\t", ""))
        if kind is None and not body <= set(_POGEMA_CHARS):
            return grid_map_of(parse_layout(text, name, source))
        fmt = "pogema"
        grid, starts, targets = _parse_pogema(lines, source)
    free = grid.copy()
    if not free.any():
        raise InputError("the map has no free cell", source=source, line=1, field="map")
    if not starts.any() or not targets.any():
        missing = "start ('@' or '.')" if not starts.any() else "target ('$' or '.')"
        raise InputError(f"the map has no {missing} cell", source=source, line=1, field="map")
    free.flags.writeable = False
    return GridMap(name, free, _cells(starts), _cells(targets), source, fmt)


def _cells(mask: np.ndarray) -> list[tuple[int, int]]:
    """Row-major ``(row, col)`` of the True cells of ``mask``."""
    return [(int(r), int(c)) for r, c in np.argwhere(mask)]


def _parse_pogema(lines: list[str], source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [(n, ln.replace(" ", "").replace("\t", "")) for n, ln in enumerate(lines, start=1)]
    rows = [(n, ln) for n, ln in rows if ln]
    if not rows:
        raise InputError("the map is empty", source=source, line=len(lines) or 1, field="map")
    width = max(len(ln) for _, ln in rows)
    layers = np.zeros((3, len(rows), width), dtype=bool)  # free, start, target
    for r, (lineno, row) in enumerate(rows):
        for c, ch in enumerate(row):
            kind = _POGEMA_CHARS.get(ch)
            if kind is None:
                raise InputError(
                    f"unknown character {ch!r} at column {c + 1}; POGEMA maps use # obstacle, "
                    ". free, @ start, $ target, ! free (neither start nor target)",
                    source=source,
                    line=lineno,
                    field="map",
                )
            layers[:, r, c] = kind
    return layers[0], layers[1], layers[2]


def _parse_movingai(lines: list[str], source: str) -> np.ndarray:
    values: dict[str, int] = {}
    k = 0
    for key in _MOVINGAI_HEADER:
        while k < len(lines) and not lines[k].strip():
            k += 1
        parts = lines[k].split() if k < len(lines) else []
        if not parts or parts[0].lower() != key:
            got = repr(lines[k].strip()) if k < len(lines) else "the end of the file"
            raise InputError(
                f"expected the header line '{key}{'' if key == 'map' else ' <value>'}', got {got}; "
                "a MovingAI map starts with: type octile / height H / width W / map",
                source=source,
                line=min(k, len(lines) - 1) + 1,
                field=key,
            )
        if key in ("height", "width"):
            if len(parts) != 2 or not parts[1].isdigit() or int(parts[1]) < 1:
                raise InputError(
                    f"{key} must be a positive integer, got {' '.join(parts[1:])!r}",
                    source=source,
                    line=k + 1,
                    field=key,
                )
            values[key] = int(parts[1])
        k += 1
    height, width = values["height"], values["width"]
    body = [(n, ln.rstrip("\r\n")) for n, ln in enumerate(lines[k:], start=k + 1)]
    while body and not body[-1][1].strip():
        body.pop()
    if len(body) != height:
        raise InputError(
            f"the header says height {height} but the map has {len(body)} rows",
            source=source,
            line=body[-1][0] if body else k,
            field="height",
        )
    free = np.zeros((height, width), dtype=bool)
    for r, (lineno, row) in enumerate(body):
        if len(row) != width:
            raise InputError(
                f"row {r + 1} has {len(row)} characters but the header says width {width}",
                source=source,
                line=lineno,
                field="width",
            )
        for c, ch in enumerate(row):
            if ch in _MOVINGAI_PASSABLE:
                free[r, c] = True
            elif ch not in _MOVINGAI_OBSTACLE:
                raise InputError(
                    f"unknown character {ch!r} at column {c + 1}; MovingAI maps use . G S "
                    "passable, @ O T W obstacles",
                    source=source,
                    line=lineno,
                    field="map",
                )
    return free


def list_grid_maps() -> list[str]:
    """Names of the shipped grid maps (``marlm/data/grids``): ``wfi_warehouse``, the map of
    POGEMA's lifelong warehouse benchmark (``pogema-benchmark``, experiment 03-warehouse)."""
    return sorted(p.name[:-4] for p in _grid_dir().iterdir() if p.name.endswith(".txt"))


def _grid_dir():
    return resources.files("marlm") / "data" / "grids"


def load_grid_map(path: str | Path) -> GridMap:
    """Read a grid map file (POGEMA, MovingAI, marlm or RWARE; see :func:`parse_grid_map`), a
    shipped grid map by name (:func:`list_grid_maps`) or a shipped warehouse layout by name.

    Raises:
        InputError: missing file (field ``layout``), bytes that are not UTF-8, or any error of
            :func:`parse_grid_map`.
    """
    if isinstance(path, str) and path in list_grid_maps():
        resource = _grid_dir() / f"{path}.txt"
        return parse_grid_map(resource.read_text(encoding="utf-8"), path, resource.name)
    if isinstance(path, str) and path in list_layouts():
        return grid_map_of(load_layout(path))
    p = Path(path)
    check_path_text(p, field="layout")  # its name is the map's, written into the trace
    if not p.is_file():
        raise InputError(f"no map file {str(p)!r}", source=str(p), field="layout")
    return parse_grid_map(read_map_text(p), p.stem, p)
