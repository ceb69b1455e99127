"""Run seeds or episodes as Ray tasks: a local Ray by default, an existing cluster with ``address``.

:func:`map_seeds` is the one entry point the commands use (``--workers N`` / ``--address``):
``map_seeds(fn, seeds, workers=N, address=None)`` returns ``[fn(s) for s in seeds]`` in seed order.
Every task gets its seed and nothing else random, and ``fn`` must derive all its randomness from
that seed (the marlm convention), so a seed's result is the same whichever worker runs it and
whether it runs under Ray or serially; ``tests/scale/test_parallel.py`` checks that equality.

Bad settings fail before any work starts, with an :class:`InputError` naming the option:
``--workers`` below 1, an ``--address`` that does not answer, and a map whose distance tables
would not fit in memory on the workers (:func:`check_layout_fits`).

Ray (Moritz et al. 2018, "Ray: A Distributed Framework for Emerging AI Applications", OSDI).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from marlm.envs.warehouse.batched import default_memory_limit_bytes
from marlm.envs.warehouse.layout import Layout, load_layout
from marlm.errors import InputError, RunError

T = TypeVar("T")

#: Object store of a local Ray started here (bytes). Results are small (Q-tables, metrics).
LOCAL_OBJECT_STORE_BYTES = 80 * 2**20
#: Seconds to wait for an ``--address`` to answer before giving up.
CONNECT_TIMEOUT_S = 5.0


def check_workers(workers: int | None) -> int:
    """The number of workers, or an :class:`InputError` naming ``--workers``.

    ``None`` means 1 (serial, no Ray).
    """
    if workers is None:
        return 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(
            f"must be a whole number >= 1 (1 runs serially without Ray), got {workers!r}",
            field="--workers",
        )
    return workers


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port`` or ``ray://host:port``; None for ``"auto"``."""
    if address == "auto":
        return None
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InputError(
            f"got {address!r}; give host:port of a Ray head (e.g. 10.0.0.5:6379), "
            "ray://host:10001, or 'auto'",
            field="--address",
        )
    return host.strip("[]"), int(port)


#: What an HTTP/2 client sends first (RFC 9113 section 3.4): the preface and an empty SETTINGS
#: frame. A Ray head (its GCS, or the Ray Client server of ``ray://``) speaks gRPC, so HTTP/2,
#: and answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4  # the frame type byte (the 4th of a frame header)


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse an ``--address`` where no Ray head answers within ``timeout_s`` (all together):
    nothing accepts a TCP connection, or what does is not a gRPC server (a Ray head's GCS and
    Ray Client server speak gRPC over HTTP/2, and answer its preface with a SETTINGS frame):
    an HTTP/1 server, an SSH server, a port that accepts and says nothing. ``ray.init`` itself
    would wait minutes for such a port.

    Raises:
        InputError: malformed address, nothing answers there, or not as a Ray head (field
            ``--address``).
    """
    hp = _host_port(address)
    if hp is None:
        return
    fix = "start one with 'ray start --head' or drop --address to use a local Ray"
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection(hp, timeout=timeout_s) as sock:
            sock.sendall(_H2_PREFACE)
            got = b""
            while len(got) < 9:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = sock.recv(9 - len(got))
                if not chunk:
                    break
                got += chunk
    except TimeoutError:
        got = None
    except OSError as e:
        if not isinstance(e, ConnectionResetError):
            raise InputError(
                f"cannot reach a Ray head at {address!r} ({e.strerror or type(e).__name__}); {fix}",
                field="--address",
            ) from e
        got = b""
    if got is not None and len(got) >= 4 and got[3] == _H2_SETTINGS:
        return
    if got is None:
        what = f"accepts connections but did not answer within {timeout_s:g} s as a Ray head does"
    elif got.startswith(b"HTTP/"):
        what = "answered as HTTP/1.1 (a web server?)"
    elif not got:
        what = "closed the connection without a word"
    else:
        what = f"answered {got[:20]!r}"
    raise InputError(
        f"{address!r} {what}: not a Ray head (its GCS, or ray://host:10001, speaks gRPC); "
        f"check the host and port, {fix}",
        field="--address",
    )


def layout_memory_bytes(layout: Layout) -> int:
    """Bytes one process needs for ``layout``'s distance tables (all access cells + stations).

    ``int32[H, W]`` per table, counted twice (the layout's cache and the env's stacked copy).
    """
    targets = len(set(layout.access.values())) + len(layout.stations)
    return 2 * targets * layout.height * layout.width * 4


def check_layout_fits(
    layout: str | Path | Layout, workers: int = 1, available: int | None = None
) -> Layout:
    """Load ``layout`` and refuse it when ``workers`` copies of its tables exceed memory.

    Args:
        layout: layout name, map file or :class:`Layout`.
        workers: processes that will each hold the tables.
        available: bytes available (default: 80% of this machine's available memory; on a
            cluster each node is assumed to have as much).

    Raises:
        InputError: the map does not fit (field ``layout``, says how much it needs).
    """
    lay = layout if isinstance(layout, Layout) else load_layout(layout)
    need = layout_memory_bytes(lay) * max(1, workers)
    if available is None:
        available = default_memory_limit_bytes()
    if available is not None and need > available:
        raise InputError(
            f"a {lay.height}x{lay.width} map with {len(lay.access)} shelves needs about "
            f"{need / 2**20:.0f} MiB of distance tables for {workers} worker(s), but only "
            f"{available / 2**20:.0f} MiB are available; use a smaller map or fewer workers",
            source=lay.source,
            field="layout",
        )
    return lay


def _ensure_ray(workers: int, address: str | None):
    """Connect to ``address`` or start a local Ray with ``workers`` CPUs (reused if running)."""
    import ray

    if ray.is_initialized():
        return ray
    try:
        if address is not None:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(
                num_cpus=workers,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                log_to_driver=False,
                configure_logging=False,
            )
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise InputError(
            f"could not start or join Ray ({e}); check --address or run without it",
            field="--address" if address is not None else "--workers",
        ) from e
    return ray


#: How many times a task runs again after its worker process died (Ray's ``max_retries``).
TASK_RETRIES = 2


def _call(fn: Callable[[int], T], seed: int) -> T:
    """The Ray task body: ``fn(seed)`` (``ray.remote`` takes plain functions only)."""
    return fn(seed)


def map_seeds(
    fn: Callable[[int], T],
    seeds: Iterable[int],
    *,
    workers: int | None = 1,
    address: str | None = None,
    num_cpus_per_task: float = 1.0,
    on_result: Callable[[int, T], None] | None = None,
) -> list[T]:
    """``[fn(seed) for seed in seeds]``, as Ray tasks when ``workers > 1`` or ``address`` is set.

    A task whose worker process dies (killed, out of memory) runs again, up to
    :data:`TASK_RETRIES` times (Ray's ``max_retries``; an exception raised by ``fn`` itself is
    never retried: it would fail again).

    Args:
        fn: a picklable function of one seed (module-level functions and ``functools.partial``
            of them are); all its randomness must come from the seed.
        seeds: the seeds, in the order the results come back.
        workers: tasks running at once: the CPUs of a local Ray, or the concurrency on a cluster.
            1 (or None) without ``address`` runs serially in this process without Ray.
        address: a Ray head ``host:port`` / ``ray://host:port`` / ``"auto"``; None starts a
            local Ray (or reuses one already initialised in this process).
        num_cpus_per_task: CPUs Ray reserves per task.
        on_result: called with ``(seed, result)`` as each seed finishes (in finishing order), so
            a caller can keep what finished if a later seed fails.

    Returns:
        The results in seed order.

    Raises:
        InputError: ``workers`` < 1 or an unreachable ``address``, before any task runs.
        RunError: a seed's worker died on every attempt; names the seeds that finished.
        Exception: whatever ``fn`` raised for the first failing seed (Ray's wrapper removed).
    """
    workers = check_workers(workers)
    seeds = list(seeds)
    if address is not None:
        check_address(address)
    if workers == 1 and address is None:
        serial: list[T] = []
        for s in seeds:
            serial.append(fn(s))
            if on_result is not None:
                on_result(s, serial[-1])
        return serial
    ray = _ensure_ray(workers, address)
    task = ray.remote(num_cpus=num_cpus_per_task, max_retries=TASK_RETRIES)(_call)
    fn_ref = ray.put(fn)  # shipped once, not once per seed
    results: list[Any] = [None] * len(seeds)
    finished: list[int] = []
    pending: dict[Any, int] = {}
    queue = list(enumerate(seeds))
    try:
        while queue or pending:
            while queue and len(pending) < workers:  # at most `workers` tasks in flight
                i, s = queue.pop(0)
                pending[task.remote(fn_ref, s)] = i
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                results[i] = ray.get(ref)
                finished.append(seeds[i])
                if on_result is not None:
                    on_result(seeds[i], results[i])
    except ray.exceptions.RayTaskError as e:
        _cancel(ray, pending)
        # Ray wraps a task's exception: ``as_instanceof_cause`` gives a RayTaskError (``e``, or
        # one also of the exception's class) whose ``cause`` is the exception ``fn`` raised.
        cause = e.as_instanceof_cause()
        task_error = ray.exceptions.RayTaskError
        raise (
            cause.cause if isinstance(cause, task_error) and cause.cause is not None else cause
        ) from None
    except ray.exceptions.RayError as e:  # the worker died on every attempt (WorkerCrashedError)
        _cancel(ray, pending)
        kept = ", ".join(map(str, sorted(finished))) or "none"
        raise RunError(
            f"a Ray worker died {TASK_RETRIES + 1} times running one seed "
            f"({type(e).__name__}); seeds finished and kept: {kept}"
        ) from None
    return results


def _cancel(ray: Any, pending: dict[Any, int]) -> None:
    for ref in pending:
        ray.cancel(ref)


def train_seed(
    seed: int, *, layout: str = "small", episodes: int = 60, max_steps: int = 400, **kwargs: Any
) -> dict[str, Any]:
    """Train the warehouse executor with one seed; a picklable summary (Ray task body).

    Returns:
        ``{"seed", "q" (float64[512, 5]), "episode_returns", "deliveries", "updates"}``.
    """
    from marlm.hybrid.acting.executor import train_executor

    policy, stats = train_executor(
        layout=layout, episodes=episodes, max_steps=max_steps, seed=seed, **kwargs
    )
    return {
        "seed": seed,
        "q": policy.q,
        "episode_returns": stats.episode_returns,
        "deliveries": stats.deliveries,
        "updates": stats.updates,
    }


def train_seeds(
    seeds: Sequence[int],
    *,
    workers: int | None = 1,
    address: str | None = None,
    layout: str = "small",
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
    **train_kwargs: Any,
) -> list[dict[str, Any]]:
    """Train one executor per seed (:func:`train_seed`), spread over Ray when asked.

    Checks ``workers``, ``address`` and that the layout fits in memory before any training.
    ``on_result(seed, summary)`` is called as each seed finishes (see :func:`map_seeds`).
    """
    import functools

    workers = check_workers(workers)
    check_layout_fits(layout, workers)
    fn = functools.partial(train_seed, layout=layout, **train_kwargs)
    return map_seeds(fn, seeds, workers=workers, address=address, on_result=on_result)


def seed_table_path(out: str | Path, seed: int) -> Path:
    """Where :func:`train_warehouse_seeds` writes seed ``seed``'s table: ``<stem>-seed<s>.npz``
    next to ``out``."""
    out = Path(out)
    return out.with_name(f"{out.stem}-seed{seed}{out.suffix or '.npz'}")


def train_warehouse_seeds(
    seeds: Sequence[int],
    out: str | Path,
    *,
    workers: int | None = 1,
    address: str | None = None,
    layout: str = "small",
    **train_kwargs: Any,
) -> list[dict[str, Any]]:
    """``marlm train warehouse --seeds/--workers/--address``: one policy per seed, saved.

    Trains with :func:`train_seeds` and writes seed ``s``'s table next to ``out`` as
    ``<stem>-seed<s>.npz`` (atomically, :meth:`QExecutor.save`).

    Returns:
        Per seed, in seed order: ``{"seed", "path", "delivered_last" (orders delivered in the last
        episode), "updates"}``.
    """
    from marlm.hybrid.acting.executor import QExecutor

    seeds = list(seeds)
    if not seeds:
        raise InputError("give at least one seed", field="--seeds")
    out = Path(out)
    rows: dict[int, dict[str, Any]] = {}

    def save(
        seed: int, r: dict[str, Any]
    ) -> None:  # as each seed finishes: kept if a later one fails
        info = {"layout": str(layout), "seed": seed, "updates": r["updates"], **train_kwargs}
        path = QExecutor(q=r["q"], info=info).save(seed_table_path(out, seed))
        rows[seed] = {
            "seed": seed,
            "path": path,
            "delivered_last": int(r["deliveries"][-1]),
            "updates": r["updates"],
        }

    train_seeds(
        seeds, workers=workers, address=address, layout=layout, on_result=save, **train_kwargs
    )
    return [rows[s] for s in seeds]


__all__ = [
    "check_address",
    "check_layout_fits",
    "TASK_RETRIES",
    "check_workers",
    "layout_memory_bytes",
    "map_seeds",
    "seed_table_path",
    "train_seed",
    "train_seeds",
    "train_warehouse_seeds",
]
