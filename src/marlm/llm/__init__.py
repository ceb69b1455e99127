"""Agents that change context, not weights: backends, JSON tool actions, teams, LLM rewards.

Imports nothing else of marlm except :mod:`marlm.errors`.
"""

from __future__ import annotations

from .actions import ActionError, CallTool, Finish, action_schema, parse_action, validate_json
from .agent import AgentResult, ToolAgent
from .backends import (
    BackendError,
    BackendTimeout,
    ChatModel,
    ChatResult,
    EmbeddedModel,
    OpenAICompatible,
    default_model_path,
)
from .reward import LLMReward
from .team import Role, Team, TeamMessage, TeamResult
from .tools import ToolArgumentError, ToolRegistry, UnknownToolError

__all__ = [
    "ActionError",
    "AgentResult",
    "BackendError",
    "BackendTimeout",
    "CallTool",
    "ChatModel",
    "ChatResult",
    "EmbeddedModel",
    "Finish",
    "LLMReward",
    "OpenAICompatible",
    "Role",
    "Team",
    "TeamMessage",
    "TeamResult",
    "ToolAgent",
    "ToolArgumentError",
    "ToolRegistry",
    "UnknownToolError",
    "action_schema",
    "default_model_path",
    "parse_action",
    "validate_json",
]
