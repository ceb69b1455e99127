"""Agents that change context, not weights: backends, JSON tool actions, teams, LLM rewards.

Imports nothing else of marlm except :mod:`marlm.errors`.
"""

from __future__ import annotations

from .actions import ActionError, CallTool, Finish, action_schema, parse_action, validate_json
from .agent import AgentResult, ToolAgent
from .backends import (
    ChatModel,
    ChatResult,
    EmbeddedModel,
    OpenAICompatible,
    default_model_path,
    make_backend,
)
from .breaker import CircuitBreaker, FakeClock, SystemClock
from .errors import (
    BackendClosed,
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    CircuitOpen,
    ContextLengthExceeded,
    EndpointNotFound,
    InvalidAnswer,
    ScoringUnsupported,
)
from .reward import LLMReward
from .team import Role, Team, TeamMessage, TeamResult
from .tools import ToolArgumentError, ToolRegistry, UnknownToolError

__all__ = [
    "ActionError",
    "AgentResult",
    "BackendClosed",
    "BackendError",
    "BackendHTTPError",
    "BackendTimeout",
    "CallTool",
    "ChatModel",
    "ChatResult",
    "CircuitBreaker",
    "CircuitOpen",
    "ContextLengthExceeded",
    "EmbeddedModel",
    "EndpointNotFound",
    "FakeClock",
    "Finish",
    "InvalidAnswer",
    "LLMReward",
    "OpenAICompatible",
    "Role",
    "ScoringUnsupported",
    "SystemClock",
    "Team",
    "TeamMessage",
    "TeamResult",
    "ToolAgent",
    "ToolArgumentError",
    "ToolRegistry",
    "UnknownToolError",
    "action_schema",
    "default_model_path",
    "make_backend",
    "parse_action",
    "validate_json",
]
