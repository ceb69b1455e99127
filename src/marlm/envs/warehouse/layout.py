"""Warehouse layouts: ASCII maps, shelf names, access cells and shortest-path distance tables.

Two text formats are accepted (the format is detected from the characters used):

marlm ASCII
    ``#`` wall, ``S`` shelf (blocked), ``P`` pick/drop station, ``R`` robot start (floor),
    ``.`` floor.
RWARE layout strings (Papoudakis et al. 2021, ``rware.warehouse.Warehouse(layout=...)``)
    ``x`` shelf, ``g`` goal (our station), ``.`` corridor; case-insensitive, spaces ignored,
    exactly as RWARE 2.0.0 reads them. RWARE maps carry no robot starts: robots are placed on
    free cells drawn from the episode seed (see :meth:`Layout.place_robots`). One difference to
    RWARE: here a shelf cell is always blocked (RWARE lets an unloaded robot drive under shelves).

The grid formats of the multi-agent path finding field (POGEMA, MovingAI) are read by
:mod:`marlm.envs.warehouse.grid_maps`, beside the lifelong scenario that uses them.

Either warehouse format may start with ``key: value`` header lines; the only key is ``robots: <n>``, the
default number of robots. Without a header the default is the number of ``R`` cells, or 2 (RWARE's
``tiny-2ag`` task) when the map has none. Rows shorter than the longest row are padded on the right
with walls, so ragged maps are valid. The grid edge acts as a wall.

Every robot start ('R') must reach every shelf's pick cell and every station by 4-neighbour moves
over free cells; a map that cuts one off is refused when it is parsed (:class:`InputError`). Robots
beyond the 'R' cells are drawn only from the free cells joined to the stations, so a walled-off
pocket of floor never hosts one.

Coordinates are ``(row, col)`` everywhere: row 0 is the top line of the file, col 0 its first
character. Shelves are named ``S<row>-<col>`` (e.g. ``S3-4`` is the shelf at row 3, column 4);
:meth:`Layout.shelf_name` also accepts ``"3,4"``.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from marlm.errors import InputError, check_path_text

FLOOR, WALL, SHELF, STATION = 0, 1, 2, 3
"""Cell codes of :attr:`Layout.grid` (uint8)."""

UNREACHABLE = -1
"""Sentinel in distance tables for cells that cannot be reached (blocked or disconnected)."""

DEFAULT_RWARE_ROBOTS = 2

_MARLM_CHARS = {"#": WALL, "S": SHELF, "P": STATION, "R": FLOOR, ".": FLOOR}
_RWARE_CHARS = {"x": SHELF, "g": STATION, ".": FLOOR}
_HEADER = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$")
_SHELF_NAME = re.compile(r"^\s*[Ss](\d+)-(\d+)\s*$")
_SHELF_CELL = re.compile(r"^\s*\(?\s*(\d+)\s*,\s*(\d+)\s*\)?\s*$")
# Neighbour order used for every tie-break: up, down, left, right (same as the action codes 1..4).
_NEIGHBOURS = ((-1, 0), (1, 0), (0, -1), (0, 1))


def _layout_dir():
    return resources.files("marlm") / "data" / "layouts"


def list_layouts() -> list[str]:
    """Names of the shipped layouts (files in ``marlm/data/layouts``), sorted."""
    return sorted(p.name[:-4] for p in _layout_dir().iterdir() if p.name.endswith(".txt"))


class _FreeGrid:
    """What every grid map answers from its ``free`` mask (bool[H, W]) and ``_distance_cache``:
    its size and cached BFS distances. Shared by :class:`Layout` and :class:`marlm.envs.warehouse.grid_maps.GridMap`."""

    free: np.ndarray
    _distance_cache: dict

    @property
    def height(self) -> int:
        return int(self.free.shape[0])

    @property
    def width(self) -> int:
        return int(self.free.shape[1])

    def distance_from(self, cell: tuple[int, int]) -> np.ndarray:
        """BFS shortest-path distances (4-neighbour moves over free cells) from ``cell``.

        Returns:
            int32[H, W], read-only and cached per cell; :data:`UNREACHABLE` (-1) where no path
            exists or the cell is blocked.
        """
        key = (int(cell[0]), int(cell[1]))
        table = self._distance_cache.get(key)
        if table is None:
            table = _bfs(self.free, [key])
            table.flags.writeable = False
            self._distance_cache[key] = table
        return table


@dataclass(frozen=True, eq=False)
class Layout(_FreeGrid):
    """A parsed warehouse map with precomputed tables.

    Attributes:
        name: layout name (shipped name or file stem).
        grid: uint8[H, W] cell codes (FLOOR, WALL, SHELF, STATION).
        starts: robot start cells ('R'), row-major order; empty for RWARE maps.
        shelves: shelf name (``S<r>-<c>``) -> shelf cell, row-major order.
        access: shelf name -> the free neighbour cell where the pick happens. Among the neighbours
            reachable from a station, the one nearest to a station; ties broken up, down, left, right.
        drop: shelf name -> the station nearest to its access cell (ties: row-major station order).
        stations: station cells, row-major order.
        free: bool[H, W], True on FLOOR and STATION cells.
        default_robots: robots used when the env gets ``n_robots=None``.
        source: the file the map came from (for error messages), or ``"<string>"``.
    """

    name: str
    grid: np.ndarray
    starts: list[tuple[int, int]]
    shelves: dict[str, tuple[int, int]]
    access: dict[str, tuple[int, int]]
    drop: dict[str, tuple[int, int]]
    stations: list[tuple[int, int]]
    free: np.ndarray
    default_robots: int
    source: str = "<string>"
    robots_line: int | None = None
    _distance_cache: dict = field(default_factory=dict, repr=False)

    @property
    def station_distance(self) -> np.ndarray:
        """int32[H, W]: distance to the nearest station (multi-source BFS), -1 if none reachable."""
        table = self._distance_cache.get("stations")
        if table is None:
            table = _bfs(self.free, self.stations)
            table.flags.writeable = False
            self._distance_cache["stations"] = table
        return table

    @property
    def station_names(self) -> dict[tuple[int, int], str]:
        """Station cell -> its name: ``A``, ``B``, ``C``, ... in reading order (top row first,
        left to right), then ``AA``, ``AB``, ... after ``Z``."""
        return {cell: station_name(k) for k, cell in enumerate(self.stations)}

    def shelf_name(self, value: str) -> str:
        """Normalise a shelf reference (``"S3-4"``, ``"s3-4"``, ``"3,4"``, ``"(3, 4)"``) to its name.

        Raises:
            KeyError: no shelf at that cell / with that name (message lists the format).
        """
        match = _SHELF_NAME.match(value) or _SHELF_CELL.match(value)
        if match is not None:
            name = f"S{int(match.group(1))}-{int(match.group(2))}"
            if name in self.shelves:
                return name
        raise KeyError(
            f"no shelf {value!r} in layout {self.name!r}: give a name like "
            f"{next(iter(self.shelves))!r} or a cell 'row,col' of an 'S'/'x' cell"
        )

    def place_robots(self, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
        """Start cells for ``n`` robots: the first ``n`` 'R' cells, the rest drawn from ``rng``.

        Extra robots go to distinct free cells joined to the stations (free cells with no path
        to them never host a robot) that are not stations and not already used (stations only if
        nothing else is left), drawn uniformly without replacement.

        Raises:
            InputError: ``n`` exceeds the number of free cells joined to the stations (field
                ``n_robots``).
        """
        free_cells = self.joined_cells()
        n_free = len(free_cells)
        if n > n_free:
            raise InputError(
                f"{n} robots but layout {self.name!r} has only {n_free} free cells joined to "
                f"its stations; use at most {n_free} robots",
                source=self.source,
                line=self.robots_line,
                field="robots" if self.robots_line else "n_robots",
            )
        cells = list(self.starts[:n])
        if len(cells) < n:
            used = set(cells)
            station_set = set(self.stations)
            pool = [c for c in free_cells if c not in used and c not in station_set]
            pool += [c for c in free_cells if c not in used and c in station_set]
            need = n - len(cells)
            first = [c for c in pool if c not in station_set]
            if len(first) >= need:
                pick = rng.choice(len(first), size=need, replace=False)
                cells += [first[i] for i in sorted(pick)]
            else:
                cells += pool[:need]
        return cells

    def joined_cells(self) -> list[tuple[int, int]]:
        """The free cells with a path to the stations, row-major: where robots may start.

        The area the loader's reachability check (:func:`_check_starts_reach_everything`)
        guarantees joined to every shelf's pick cell and every station; free cells walled off
        from it are left out (a robot there could serve nothing).
        """
        return [(int(c[0]), int(c[1])) for c in np.argwhere(self.station_distance >= 0)]

    def to_text(self) -> str:
        """The map in marlm ASCII (round-trips through :func:`parse_layout`)."""
        chars = {FLOOR: ".", WALL: "#", SHELF: "S", STATION: "P"}
        rows = [[chars[int(v)] for v in row] for row in self.grid]
        for r, c in self.starts:
            rows[r][c] = "R"
        return "\n".join("".join(row) for row in rows) + "\n"


def station_name(k: int) -> str:
    """The name of the ``k``-th station in reading order (0 -> ``A``, 25 -> ``Z``, 26 -> ``AA``)."""
    name = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        name = chr(ord("A") + r) + name
    return name


def _bfs(free: np.ndarray, sources: list[tuple[int, int]]) -> np.ndarray:
    """``int32[H, W]`` steps from the nearest of ``sources`` over 4-neighbour moves between free
    cells; :data:`UNREACHABLE` where no path exists or the cell is blocked (a source off the
    map or blocked is ignored). Breadth-first search, in compiled code (SciPy's unweighted
    shortest paths over the grid graph); :func:`_bfs_reference` is the plain queue version."""
    free = np.asarray(free, dtype=bool)
    height, width = free.shape
    dist = np.full((height, width), UNREACHABLE, dtype=np.int32)
    starts = sorted(
        {r * width + c for r, c in sources if 0 <= r < height and 0 <= c < width and free[r, c]}
    )
    if not starts:
        return dist
    graph = _grid_graph(height, width, free.tobytes())
    steps = dijkstra(graph, directed=False, indices=starts, unweighted=True, min_only=True)
    reached = np.isfinite(steps)
    dist.reshape(-1)[reached] = steps[reached].astype(np.int32)
    return dist


@lru_cache(maxsize=8)
def _grid_graph(height: int, width: int, free_bytes: bytes) -> csr_matrix:
    """The 4-neighbour grid graph of the free cells: ``csr_matrix[H*W, H*W]``, an edge (weight
    1) between each pair of free cells side by side; node ``r * W + c``."""
    free = np.frombuffer(free_bytes, dtype=bool).reshape(height, width)
    index = np.arange(height * width).reshape(height, width)
    right = free[:, :-1] & free[:, 1:]
    down = free[:-1, :] & free[1:, :]
    src = np.concatenate([index[:, :-1][right], index[:-1, :][down]])
    dst = np.concatenate([index[:, 1:][right], index[1:, :][down]])
    n = height * width
    return csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))


def _bfs_reference(free: np.ndarray, sources: list[tuple[int, int]]) -> np.ndarray:
    """:func:`_bfs` as a plain queue (the reference it is tested against)."""
    height, width = free.shape
    dist = np.full((height, width), UNREACHABLE, dtype=np.int32)
    queue: deque[tuple[int, int]] = deque()
    for r, c in sources:
        if 0 <= r < height and 0 <= c < width and free[r, c] and dist[r, c] < 0:
            dist[r, c] = 0
            queue.append((r, c))
    while queue:
        r, c = queue.popleft()
        d = dist[r, c] + 1
        for dr, dc in _NEIGHBOURS:
            nr, nc = r + dr, c + dc
            if 0 <= nr < height and 0 <= nc < width and free[nr, nc] and dist[nr, nc] < 0:
                dist[nr, nc] = d
                queue.append((nr, nc))
    return dist


def parse_layout(text: str, name: str = "custom", source: str | Path = "<string>") -> Layout:
    """Parse a map in marlm ASCII or RWARE format (see the module docstring).

    Args:
        text: the map text.
        name: layout name.
        source: file the text came from, used in error messages.

    Raises:
        InputError: unknown character, bad header, empty map, no station, a shelf with no free
            neighbour joined to a station, a robot start ('R', or any free cell when robots are
            drawn) with no path to some shelf's pick cell or some station, or a ``robots:``
            header larger than the number of free cells joined to the stations. The error names
            ``source``, the 1-based line and the field.
    """
    source = str(source)
    lines = text.splitlines()
    robots_header: int | None = None
    robots_line: int | None = None
    rows: list[tuple[int, str]] = []  # (1-based file line, map row text)
    for lineno, raw in enumerate(lines, start=1):
        header = _HEADER.match(raw) if not rows else None
        if header is not None:
            key, value = header.group(1).lower(), header.group(2)
            if key != "robots":
                raise InputError(
                    f"unknown header {key!r}; the only header is 'robots: <n>'",
                    source=source,
                    line=lineno,
                    field=key,
                )
            if not value.isdigit() or int(value) < 1:
                raise InputError(
                    f"robots must be a positive integer, got {value!r}",
                    source=source,
                    line=lineno,
                    field="robots",
                )
            robots_header, robots_line = int(value), lineno
            continue
        if raw.strip() == "" and (not rows or all(not x.strip() for x in lines[lineno:])):
            continue  # blank lines before the map and after it
        rows.append((lineno, raw.rstrip("\r\n")))
    if not rows:
        raise InputError("the map is empty", source=source, line=len(lines) or 1, field="map")

    foreign = _grid_format(lines)
    if foreign is not None:
        raise InputError(
            f"this is a {foreign} map: it has no shelves or stations, so it cannot be a warehouse; "
            "read it with marlm.envs.warehouse.load_grid_map (lifelong scenario) or draw the "
            "warehouse in marlm's format (# wall, S shelf, P station, R robot start, . floor)",
            source=source,
            line=rows[0][0],
            field="map",
        )
    body = "".join(row for _, row in rows)
    rware = set(body.replace(" ", "")) <= set("xXgG.") and bool(set(body) & set("xXgG"))
    chars = _RWARE_CHARS if rware else _MARLM_CHARS
    if rware:
        rows = [(n, row.replace(" ", "")) for n, row in rows]
    width = max(len(row) for _, row in rows)
    grid = np.full((len(rows), width), WALL, dtype=np.uint8)
    starts: list[tuple[int, int]] = []
    for r, (lineno, row) in enumerate(rows):
        for c, ch in enumerate(row):
            code = chars.get(ch.lower() if rware else ch)
            if code is None:
                raise InputError(
                    f"unknown character {ch!r} at column {c + 1}; use # wall, S shelf, "
                    "P station, R robot start, . floor (or RWARE's x shelf, g goal, . corridor)",
                    source=source,
                    line=lineno,
                    field="map",
                )
            grid[r, c] = code
            if ch == "R":
                starts.append((r, c))

    stations = [(int(c[0]), int(c[1])) for c in np.argwhere(grid == STATION)]
    if not stations:
        raise InputError(
            "the map has no station; add at least one 'P' cell (RWARE: 'g')",
            source=source,
            line=rows[0][0],
            field="map",
        )
    free = (grid == FLOOR) | (grid == STATION)
    station_dist = _bfs(free, stations)

    shelves: dict[str, tuple[int, int]] = {}
    access: dict[str, tuple[int, int]] = {}
    for r, c in np.argwhere(grid == SHELF):
        r, c = int(r), int(c)
        shelf = f"S{r}-{c}"
        best: tuple[int, int] | None = None
        for dr, dc in _NEIGHBOURS:
            nr, nc = r + dr, c + dc
            inside = 0 <= nr < grid.shape[0] and 0 <= nc < width
            if (
                inside
                and station_dist[nr, nc] >= 0
                and (best is None or station_dist[nr, nc] < station_dist[best])
            ):
                best = (nr, nc)
        if best is None:
            raise InputError(
                f"shelf {shelf} at column {c + 1} cannot be reached: no free neighbour "
                "connects to a station; open a floor cell next to it",
                source=source,
                line=rows[r][0],
                field="map",
            )
        shelves[shelf] = (r, c)
        access[shelf] = best

    _check_starts_reach_everything(free, starts, stations, access, rows, source, rware)

    drop: dict[str, tuple[int, int]] = {}
    for shelf, cell in access.items():
        dist = _bfs(free, [cell])
        drop[shelf] = min((s for s in stations if dist[s] >= 0), key=lambda s: (int(dist[s]), s))

    n_free = int((station_dist >= 0).sum())
    default_robots = robots_header or len(starts) or DEFAULT_RWARE_ROBOTS
    if default_robots > n_free:
        raise InputError(
            f"{default_robots} robots but the map has only {n_free} free cells joined to its "
            f"stations; use at most {n_free} robots",
            source=source,
            line=robots_line or rows[0][0],
            field="robots",
        )
    free.flags.writeable = False
    grid.flags.writeable = False
    return Layout(
        name=name,
        grid=grid,
        starts=starts,
        shelves=shelves,
        access=access,
        drop=drop,
        stations=stations,
        free=free,
        default_robots=default_robots,
        source=source,
        robots_line=robots_line,
    )


def _check_starts_reach_everything(
    free: np.ndarray,
    starts: list[tuple[int, int]],
    stations: list[tuple[int, int]],
    access: dict[str, tuple[int, int]],
    rows: list[tuple[int, str]],
    source: str,
    rware: bool,
) -> None:
    """Refuse a map where a robot could start without a path to some shelf's pick cell or some
    station (4-neighbour moves over free cells; reachability is symmetric, so this holds exactly
    when every start, pick cell and station lies in the connected area of the first station).

    Robots start on the 'R' cells; robots beyond them are drawn from the free cells joined to the
    stations (:meth:`Layout.place_robots`), so free cells cut off from everything never host one.

    Raises:
        InputError: names ``source``, the line and column of the 'R' start (or, without 'R'
            cells, the first station, from whose area robots are drawn) and the shelf or station
            it cannot reach, and the fix (field ``map``).
    """
    area = _bfs(free, stations[:1]) >= 0
    station_char = "g" if rware else "P"
    targets = [
        (f"shelf {s} (picked from cell {cell})", "shelf", cell) for s, cell in access.items()
    ]
    targets += [
        (f"the station '{station_char}' at cell {cell}", "station", cell) for cell in stations
    ]
    outside = [t for t in targets if not area[t[2]]]
    stranded = [s for s in starts if not area[s]]
    if not outside and not stranded:
        return
    if starts:
        start = stranded[0] if stranded else starts[0]
        reach = _bfs(free, [start]) >= 0
        what, kind, _ = next(t for t in targets if not reach[t[2]])
        raise InputError(
            f"the robot start 'R' at column {start[1] + 1} (cell {start}) cannot reach {what}: "
            f"no path of free cells joins them; open floor cells ('.') between them, or remove "
            f"the {kind} or the start",
            source=source,
            line=rows[start[0]][0],
            field="map",
        )
    what, kind, _ = outside[0]
    first = stations[0]
    raise InputError(
        f"{what} cannot be reached from the station '{station_char}' at column {first[1] + 1} "
        f"(cell {first}): robots start on free cells drawn at random (the map has no 'R' "
        f"start), and one drawn on either side could not serve the other; open floor cells "
        f"between them, or remove the {kind}",
        source=source,
        line=rows[first[0]][0],
        field="map",
    )


def load_layout(name_or_path: str | Path) -> Layout:
    """Load a shipped layout by name (see :func:`list_layouts`) or a map file by path.

    Raises:
        InputError: unknown name / missing file (field ``layout``), bytes that are not UTF-8, or
            any map error of :func:`parse_layout`.
    """
    if isinstance(name_or_path, str) and name_or_path in list_layouts():
        resource = _layout_dir() / f"{name_or_path}.txt"
        return parse_layout(resource.read_text(encoding="utf-8-sig"), name_or_path, resource.name)
    path = Path(name_or_path)
    check_path_text(path, field="layout")  # its name is the layout's, written into the trace
    if not path.is_file():
        raise InputError(
            f"no layout file {str(path)!r}; give a map file or one of {list_layouts()}",
            source=str(path),
            field="layout",
        )
    return parse_layout(read_map_text(path), path.stem, path)


def read_map_text(path: Path) -> str:
    """The text of a map file, a leading byte-order mark (Windows editors) dropped.

    Raises:
        InputError: bytes that are not UTF-8, naming the line (field ``map``).
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(
            "bytes that are not UTF-8; save the map as UTF-8 text",
            source=str(path),
            line=line,
            field="map",
        ) from e


# ---------------------------------------------------------------- grid maps (MAPF formats)
_POGEMA_CHARS = {".": (True, True, True), "#": (False, False, False), "@": (True, True, False),
                 "$": (True, False, True), "!": (True, False, False)}  # fmt: skip
"""POGEMA character -> (free, start cell, target cell)."""


def _grid_format(lines: list[str], strict: bool = True) -> str | None:
    """``"MovingAI"`` or ``"POGEMA"`` when the text is one of them, else None. POGEMA: only its
    characters and one of ``@ $ !`` (``strict``), or just one of ``@ $ !`` (not strict: the
    POGEMA parser then names the character it does not know)."""
    content = [ln.strip() for ln in lines if ln.strip()]
    if not content:
        return None
    if content[0].split()[0].lower() == "type" and len(content[0].split()) == 2:
        return "MovingAI"
    body = set("".join(content).replace(" ", ""))
    if body & set("@$!") and (body <= set(_POGEMA_CHARS) or not strict):
        return "POGEMA"
    return None
