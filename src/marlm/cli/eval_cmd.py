"""Commands: eval_cmd."""

from __future__ import annotations

from .app import app  # noqa: F401
