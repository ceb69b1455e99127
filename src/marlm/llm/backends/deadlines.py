"""One deadline for a whole HTTP call: :func:`total_deadline` bounds every connect, read and
write of the calling thread together, on the connection pools :func:`hold_deadlines` prepared
inside an openai client's ``httpx`` client (``httpx`` offers a timeout per socket operation,
none for the call).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol


class _Deadline(threading.local):
    """The time (``time.monotonic()``) past which no socket operation of this thread's model
    call waits; ``None`` outside :func:`total_deadline` (the class default, read by a thread
    that never set it)."""

    at: float | None = None


_deadline = _Deadline()


@contextlib.contextmanager
def total_deadline(seconds: float) -> Iterator[None]:
    """Within the block, every connect, read and write of this thread on a client prepared by
    :func:`hold_deadlines` waits at most until ``seconds`` from now, all together: the HTTP
    client's own timeouts bound each socket operation alone, so a server that sends its
    headers a byte at a time, or its headers and then nothing, would hold a call for as long as
    it likes. Past the deadline the next operation raises the client's own timeout error."""
    previous = _deadline.at
    _deadline.at = time.monotonic() + max(seconds, 0.0)
    try:
        yield
    finally:
        _deadline.at = previous


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the thread's deadline; ``error`` once it passed."""
    at = _deadline.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _NetworkStream(Protocol):
    """The connection interface of ``httpcore`` (``httpcore2``): ``NetworkStream``."""

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes: ...

    def write(self, buffer: bytes, timeout: float | None = None) -> None: ...

    def close(self) -> None: ...

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _NetworkStream: ...

    def get_extra_info(self, info: str) -> Any: ...


class _NetworkBackend(Protocol):
    """The network backend interface of ``httpcore`` (``httpcore2``): ``NetworkBackend``."""

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, *a: Any, **k: Any
    ) -> _NetworkStream: ...

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, *a: Any, **k: Any
    ) -> _NetworkStream: ...

    def sleep(self, seconds: float) -> None: ...


class _Timeouts(NamedTuple):
    """The timeout errors of the ``httpcore`` module a pool comes from."""

    connect: type[Exception]
    read: type[Exception]
    write: type[Exception]


class _DeadlineStream:
    """A connection whose reads and writes wait at most until the thread's deadline."""

    def __init__(self, inner: _NetworkStream, errors: _Timeouts) -> None:
        self._inner, self._errors = inner, errors

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, self._errors.read))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, self._errors.write))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _DeadlineStream:
        timeout = _left(timeout, self._errors.connect)
        inner = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _DeadlineStream(inner, self._errors)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """The HTTP client's network backend, its connections under the thread's deadline."""

    def __init__(self, inner: _NetworkBackend, errors: _Timeouts) -> None:
        self._inner, self._errors = inner, errors

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, *a: Any, **k: Any
    ) -> _DeadlineStream:
        timeout = _left(timeout, self._errors.connect)
        return _DeadlineStream(self._inner.connect_tcp(host, port, timeout, *a, **k), self._errors)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, *a: Any, **k: Any
    ) -> _DeadlineStream:
        timeout = _left(timeout, self._errors.connect)
        inner = self._inner.connect_unix_socket(path, timeout, *a, **k)
        return _DeadlineStream(inner, self._errors)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


#: The packages an openai client's HTTP client comes from: ``httpx`` (openai 1 and 2) or its
#: successor ``httpx2`` (openai 3).
_HTTPX_PACKAGES = ("httpx", "httpx2")


def http_timeouts(http_client: object) -> type[Exception]:
    """The timeout error (``TimeoutException``) of the ``httpx`` package ``http_client`` comes
    from (``httpx`` or ``httpx2``; ``TimeoutError`` when neither): raised as it is, not as
    ``openai.APITimeoutError``, while a body is read."""
    for cls in type(http_client).__mro__:
        package = cls.__module__.split(".")[0]
        module = sys.modules.get(package)
        if package in _HTTPX_PACKAGES and module is not None:
            timeouts: type[Exception] = module.TimeoutException
            return timeouts
    return TimeoutError


def hold_deadlines(http_client: object) -> int:
    """Put every connection pool of ``http_client`` (the ``httpx`` client inside the openai
    client, its proxies' pools included) under :func:`total_deadline`; returns how many pools.
    Reaches into the transports' pools (``_pool._network_backend``): httpx offers no total
    timeout, and its transports take no network backend."""
    # httpx's private transport, pool and network backend: absent in other versions (checked)
    transports = [getattr(http_client, "_transport", None)]
    # httpx's private transport, pool and network backend: absent in other versions (checked)
    transports += list((getattr(http_client, "_mounts", None) or {}).values())
    held = 0
    for transport in transports:
        # httpx's private transport, pool and network backend: absent in other versions (checked)
        pool = getattr(transport, "_pool", None)
        # httpx's private transport, pool and network backend: absent in other versions (checked)
        backend = getattr(pool, "_network_backend", None)
        if pool is None or backend is None or isinstance(backend, _DeadlineBackend):
            continue
        errors = sys.modules[type(pool).__module__.split(".")[0]]  # httpcore (or httpcore2)
        timeouts = _Timeouts(errors.ConnectTimeout, errors.ReadTimeout, errors.WriteTimeout)
        pool._network_backend = _DeadlineBackend(backend, timeouts)
        held += 1
    return held


__all__ = ["hold_deadlines", "http_timeouts", "total_deadline"]
