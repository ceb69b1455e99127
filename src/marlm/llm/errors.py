"""Typed failures of a model call, grouped by who must fix them.

A caller that asks a model for something (a planner, a tool loop, a triage) meets three kinds of
failure, and records them apart:

- the **backend** failed (:class:`BackendError` and its subclasses): the server or the embedded
  model gave no usable answer: a timeout, an HTTP error, a refused connection, a wrong URL, a prompt
  longer than the context, a circuit breaker that is open, a reply that is not a chat completion
  (:class:`MalformedReply`). Not the model's fault, not ours.
- the **model** answered, but the answer is unusable (:class:`InvalidAnswer`): not JSON, cut off,
  an unknown id. The model's fault; fed back or replaced by a rule.
- anything else raised while planning is **our bug**, and is recorded as such.

Every class here is importable from :mod:`marlm.llm` and :mod:`marlm.llm.backends`.
"""

from __future__ import annotations


class BackendError(RuntimeError):
    """The backend failed (could not load, connection refused, server error): not the model's fault.

    Attributes:
        url: the URL tried, for an HTTP backend (``""`` otherwise).
    """

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class BackendTimeout(BackendError):
    """The backend did not answer within the call's timeout."""


class BackendHTTPError(BackendError):
    """The server answered with an HTTP error status (after any retries).

    Attributes:
        status: the HTTP status code (``int``).
        url: the URL of the request.
    """

    def __init__(self, message: str, *, status: int, url: str = "") -> None:
        super().__init__(message, url=url)
        self.status = status


class EndpointNotFound(BackendHTTPError):
    """HTTP 404: nothing serves the endpoint at this URL, most often a base URL without ``/v1``.

    A configuration error: retrying does not help. The message names the URL tried and, when the
    base URL does not end in ``/v1``, suggests the URL with it.
    """


class MalformedReply(BackendError):
    """The server answered (HTTP 200), but not with an OpenAI chat completion marlm can read: no
    ``choices``, a message that is not an object, content of an unknown type. The server's fault
    (or a proxy's), not the model's: the model's answer never reached us.

    Every reply shape OpenAI-compatible servers are known to send is read (see
    :func:`marlm.llm.backends.read_chat_reply`); the message names the shape that was not.
    """


class ContextLengthExceeded(BackendError, ValueError):
    """The prompt (plus the answer's token budget) does not fit the model's context window.

    Raised for this request only: it says nothing about the backend's health (the circuit breaker
    does not count it) nor about the structured-output mode. Shorten the prompt, or raise the
    context size (``--n-ctx``). Also a :class:`ValueError`, since the input is too long.
    """


class RequestRefused(BackendHTTPError, ValueError):
    """The server refused the request as the caller's mistake (HTTP 400, 413 or 422: an empty
    text, a token array, too many texts). Raised for this request only: not retried, and the
    circuit breaker does not count it (the backend is healthy). Also a :class:`ValueError`."""


class CircuitOpen(BackendError):
    """The backend failed on its last consecutive calls; calls are refused until ``retry_in_s``.

    Raised at once, without touching the backend (circuit breaker pattern, Nygard 2007,
    "Release It!", ch. 5).

    Attributes:
        failures: consecutive failures that opened the circuit (``int``).
        retry_in_s: seconds until the next trial call is let through (``float``).
        first: ``True`` for the first refusal after the circuit opened: a caller that reports the
            outage once (a trace event) reports it when ``first`` is set.
        cause: the text of the failure that opened the circuit.
    """

    def __init__(
        self, message: str, *, failures: int, retry_in_s: float, first: bool, cause: str = ""
    ) -> None:
        super().__init__(message)
        self.failures = failures
        self.retry_in_s = retry_in_s
        self.first = first
        self.cause = cause


class BackendClosed(BackendError):
    """The call was cancelled (``backend.cancel()``, e.g. at the end of a run) or the backend was
    closed (``backend.close()``, e.g. at interpreter exit) before or during the call."""


class ScoringUnsupported(BackendError):
    """The backend cannot return option log-likelihoods (no prompt log-probabilities, or wrong ones)."""


class LayerReadUnavailable(BackendError):
    """The early-exit reader (:mod:`marlm.llm.backends.layers`) cannot run with this model or
    build; the message says which step. Callers fall back to the model's final states."""


class InvalidAnswer(ValueError):
    """The model answered, but the answer is unusable: the model's fault, not the backend's.

    Raise it from answer validation (the planner's, a tool loop's) so that callers tell a bad
    answer from a failed backend and from a bug of our own.

    Attributes:
        kind: a short machine-readable word (``not_json``, ``truncated``, ``too_deep``,
            ``invalid``, ...).
        text: the answer as the model produced it.
    """

    def __init__(self, message: str, *, kind: str = "invalid", text: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.text = text


__all__ = [
    "BackendClosed",
    "BackendError",
    "BackendHTTPError",
    "BackendTimeout",
    "CircuitOpen",
    "ContextLengthExceeded",
    "EndpointNotFound",
    "InvalidAnswer",
    "LayerReadUnavailable",
    "MalformedReply",
    "RequestRefused",
    "ScoringUnsupported",
]
