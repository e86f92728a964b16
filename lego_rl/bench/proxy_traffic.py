"""What ``legorl bench proxy`` sends: a harness's calls in each model API the proxy serves, of
the same content and size (~75 KB at a session's first call: a long system prompt, 24 tools and
a repository reminder; each later call echoes the model's tool call and adds its result).

- ``anthropic-messages``, shaped like Claude Code's: system blocks, tools with ``input_schema``,
  ``tool_use`` / ``tool_result`` blocks.
- ``openai-responses``, like Codex's: the system prompt as the first ``developer`` message item
  (per session, not a shared top-level field), function tools, ``function_call`` /
  ``function_call_output`` items, ``store: false``.
- ``openai-chat``, like a tool-calling agent on Chat Completions (OpenHands through LiteLLM): a
  system message, function tools, assistant ``tool_calls`` and ``tool`` messages.

Calls are not streamed: the load reads each reply whole, as the direct endpoint's.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from lego_rl.kinds import Dialect

RULES = " ".join(
    f"Rule {i}: keep changes minimal, run the tests, explain briefly." for i in range(260)
)
REMINDER = "<system-reminder>" + "Context about the repository. " * 300 + "</system-reminder>"


def tool_specs() -> list[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON schema of the arguments) of each tool."""

    def schema(i: int) -> dict[str, Any]:
        arguments = {
            f"arg{j}": {"type": "string", "description": f"Argument {j} of tool {i}."}
            for j in range(6)
        }
        return {
            "type": "object",
            "properties": arguments | {"command": {"type": "string"}},
            "required": ["command"],
        }

    return [
        (
            "Bash" if i == 0 else f"Tool{i}",
            f"Tool {i}. " + "Use it carefully; it has many options. " * 40,
            schema(i),
        )
        for i in range(24)
    ]


def tool_output(turn: int) -> str:
    return f"total {turn}\n" + "-rw-r--r-- 1 root root 1234 file.py\n" * 20


def call_arguments(n: int) -> dict[str, str]:
    """The arguments of the backend's tool call ``n`` (a ``Bash`` call)."""
    return {"command": f"ls -la src/module_{n}"}


class Traffic(ABC):
    """One harness's requests in one dialect: ``shared`` top-level fields (the same in every
    session), a session's ``first`` conversation, and how it goes on from each reply."""

    dialect = ""
    path = ""
    conversation = "messages"
    """The top-level field that holds the conversation."""
    budget = "max_tokens"

    def headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}", "content-type": "application/json"}

    def body(self, conversation: list[dict[str, Any]], shared: dict[str, Any]) -> bytes:
        return json.dumps(
            {"model": "policy", self.budget: 256, self.conversation: conversation, **shared}
        ).encode()

    def build(self) -> Dialect:
        """The dialect the proxy serves this traffic with, from the registry (legorl-std's)."""
        from lego_rl.registry import default_registry

        dialect: Dialect = default_registry().build("dialect", self.dialect)
        return dialect

    @abstractmethod
    def shared(self) -> dict[str, Any]:
        """The top-level fields every session sends alike (system prompt, tools, settings)."""

    @abstractmethod
    def first(self, session: int) -> list[dict[str, Any]]:
        """Session ``session``'s opening conversation."""

    @abstractmethod
    def next_turn(
        self, conversation: list[dict[str, Any]], reply: dict[str, Any], turn: int
    ) -> None:
        """Echo the reply into ``conversation`` and answer its tool call, as a harness does."""

    @abstractmethod
    def reply(self, n: int) -> dict[str, Any]:
        """The direct endpoint's fixed reply: tool call ``n``, in this dialect's shape."""


class ClaudeCode(Traffic):
    dialect, path = "anthropic-messages", "/v1/messages"

    def headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key, "content-type": "application/json"}


    def shared(self) -> dict[str, Any]:
        system = [
            {"type": "text", "text": "You are Claude Code, a coding agent."},
            {"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Environment: linux, cwd /app, git repository."},
        ]
        tools = [
            {"name": name, "description": text, "input_schema": schema}
            for name, text, schema in tool_specs()
        ]
        return {"system": system, "tools": tools}

    def first(self, session: int) -> list[dict[str, Any]]:
        content = [
            {"type": "text", "text": REMINDER},
            {"type": "text", "text": f"Fix bug {session}."},
        ]
        return [{"role": "user", "content": content}]

    def next_turn(
        self, conversation: list[dict[str, Any]], reply: dict[str, Any], turn: int
    ) -> None:
        conversation.append({"role": "assistant", "content": reply["content"]})
        tool_use = next(b for b in reply["content"] if b["type"] == "tool_use")
        result = {
            "type": "tool_result",
            "tool_use_id": tool_use["id"],
            "content": tool_output(turn),
        }
        conversation.append({"role": "user", "content": [result]})

    def reply(self, n: int) -> dict[str, Any]:
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": call_arguments(n)}
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "policy",
            "content": [call],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 24},
        }


class Codex(Traffic):
    dialect, path = "openai-responses", "/v1/responses"
    conversation, budget = "input", "max_output_tokens"


    def shared(self) -> dict[str, Any]:
        tools = [
            {
                "type": "function",
                "name": name,
                "description": text,
                "strict": False,
                "parameters": schema,
            }
            for name, text, schema in tool_specs()
        ]
        return {"tools": tools, "tool_choice": "auto", "parallel_tool_calls": False, "store": False}

    def first(self, session: int) -> list[dict[str, Any]]:
        def message(role: str, *texts: str) -> dict[str, Any]:
            parts = [{"type": "input_text", "text": text} for text in texts]
            return {"type": "message", "role": role, "content": parts}

        return [
            message("developer", "You are Codex, a coding agent. " + RULES),
            message("user", REMINDER, f"Fix bug {session}."),
        ]

    def next_turn(
        self, conversation: list[dict[str, Any]], reply: dict[str, Any], turn: int
    ) -> None:
        conversation += reply["output"]
        call = next(o for o in reply["output"] if o["type"] == "function_call")
        conversation.append(
            {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": tool_output(turn),
            }
        )

    def reply(self, n: int) -> dict[str, Any]:
        call = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "Bash",
            "arguments": json.dumps(call_arguments(n)),
            "status": "completed",
        }
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "policy",
            "output": [call],
            "usage": {"input_tokens": 0, "output_tokens": 24, "total_tokens": 24},
        }


class ChatAgent(Traffic):
    dialect, path = "openai-chat", "/v1/chat/completions"


    def shared(self) -> dict[str, Any]:
        tools = [
            {
                "type": "function",
                "function": {"name": name, "description": text, "parameters": schema},
            }
            for name, text, schema in tool_specs()
        ]
        return {"tools": tools}

    def first(self, session: int) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": "You are a coding agent. " + RULES},
            {"role": "user", "content": f"{REMINDER}\nFix bug {session}."},
        ]

    def next_turn(
        self, conversation: list[dict[str, Any]], reply: dict[str, Any], turn: int
    ) -> None:
        message = reply["choices"][0]["message"]
        conversation.append(
            {
                "role": "assistant",
                "content": message.get("content"),
                "tool_calls": message["tool_calls"],
            }
        )
        call_id = message["tool_calls"][0]["id"]
        conversation.append({"role": "tool", "tool_call_id": call_id, "content": tool_output(turn)})

    def reply(self, n: int) -> dict[str, Any]:
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps(call_arguments(n))},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": "policy",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 24, "total_tokens": 24},
        }


TRAFFIC: dict[str, type[Traffic]] = {t.dialect: t for t in (ClaudeCode, Codex, ChatAgent)}
