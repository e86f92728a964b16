"""lego-rl harness plugin: the unmodified Codex CLI, speaking the OpenAI Responses API."""

from legorl_codex.harness import Codex
from legorl_codex.options import CodexOptions

__all__ = ["Codex", "CodexOptions"]
