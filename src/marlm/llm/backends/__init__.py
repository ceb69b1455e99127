"""Model backends, one module per concern; import the public names from here.

- :mod:`.protocols`: what a backend can do, declared (:class:`ChatModel`, :class:`Scorer`,
  :class:`BatchScorer`, :class:`Embedder`, :class:`TokenCounter`, :class:`Cancellable`), and the
  :class:`ChatResult` every chat call returns;
- :mod:`.spec`: :class:`BackendSpec`, the ``--llm``, ``--llm-model`` and ``--llm-timeout``
  options parsed once, with one meaning for every backend;
- :mod:`.embedded`: :class:`EmbeddedModel`, a GGUF model in process (llama-cpp-python);
- :mod:`.http`: :class:`OpenAICompatible`, a model behind an OpenAI-compatible server, and
  :mod:`.replies`, how its replies are read;
- :mod:`.guard`: the guard every call goes through (breaker, lock, timeout, cancel, close; the
  breaker itself is :mod:`marlm.llm.breaker`);
- :mod:`.factory`: :func:`make_backend`, the one factory every command builds its backend with.

Every backend takes a list of chat messages (``{"role": ..., "content": ...}``) and returns a
:class:`ChatResult`. When a JSON schema is given, the backend constrains or requests the answer
in that shape; the caller still validates the answer, whatever the backend promised. Failures
are typed (:mod:`marlm.llm.errors`).
"""

from __future__ import annotations

from ..breaker import CircuitBreaker
from ..errors import (
    BackendClosed,
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    CircuitOpen,
    ContextLengthExceeded,
    EndpointNotFound,
    MalformedReply,
    RequestRefused,
    ScoringUnsupported,
)
from .embedded import CLOSE_TIMEOUT_S, EMBEDDED_N_BATCH, EmbeddedModel
from .factory import make_backend
from .guard import BREAKER_COOLDOWN_S, BREAKER_FAILURES, Guard
from .hidden import EMBED_MAX_TOKENS, reusable_prefix
from .http import HTTP_CANCEL_WAIT_S, OpenAICompatible, StructuredMode
from .protocols import (
    BatchScorer,
    Cancellable,
    ChatModel,
    ChatResult,
    Embedder,
    FileBacked,
    Guarded,
    LayerEmbedder,
    Message,
    Named,
    Scorer,
    TokenCounter,
    backend_name,
)
from .replies import (
    content_text,
    events_body,
    read_chat_reply,
    retry_after_s,
    schema_prompt,
    with_schema_prompt,
)
from .spec import (
    DEFAULT_MODEL_PACKAGE,
    DEFAULT_TIMEOUT_S,
    LLM_OPTION_HELP,
    BackendSpec,
    check_timeout_option,
    default_model_path,
)

#: The guard's earlier, private name (kept for code that imported it).
_Guard = Guard

__all__ = [
    "BREAKER_COOLDOWN_S",
    "BREAKER_FAILURES",
    "CLOSE_TIMEOUT_S",
    "DEFAULT_MODEL_PACKAGE",
    "DEFAULT_TIMEOUT_S",
    "EMBEDDED_N_BATCH",
    "EMBED_MAX_TOKENS",
    "HTTP_CANCEL_WAIT_S",
    "LLM_OPTION_HELP",
    "BackendClosed",
    "BackendError",
    "BackendHTTPError",
    "BackendSpec",
    "BackendTimeout",
    "BatchScorer",
    "Cancellable",
    "ChatModel",
    "ChatResult",
    "CircuitBreaker",
    "CircuitOpen",
    "ContextLengthExceeded",
    "EmbeddedModel",
    "Embedder",
    "LayerEmbedder",
    "EndpointNotFound",
    "FileBacked",
    "Guard",
    "Guarded",
    "MalformedReply",
    "RequestRefused",
    "Message",
    "Named",
    "OpenAICompatible",
    "Scorer",
    "ScoringUnsupported",
    "StructuredMode",
    "TokenCounter",
    "backend_name",
    "check_timeout_option",
    "content_text",
    "default_model_path",
    "events_body",
    "make_backend",
    "read_chat_reply",
    "retry_after_s",
    "reusable_prefix",
    "schema_prompt",
    "with_schema_prompt",
]
