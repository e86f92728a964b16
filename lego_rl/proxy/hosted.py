"""Hosted tools: tools a harness offers that the proxy cannot serve, and what a dialect does
with them (its ``hosted_tools`` option).

A policy served by the proxy calls function tools, which the harness runs. Anything else in a
request's tool list (the provider's web search, file search, code interpreter, computer use,
MCP servers, Codex's ``namespace`` of sub-agent tools, freeform ``custom`` tools, Anthropic's
server tools) needs machinery the proxy does not have. ``refuse`` answers the request with a
400 that names the tool; ``drop`` leaves it out of what the policy sees and records it on the
call (``CallRecord.dropped_tools``), so a harness whose default tool set drifts does not fail
its first call.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from lego_rl.proxy.errors import BadRequest

HostedTools = Literal["refuse", "drop"]

HOSTED_TOOLS_HELP = (
    "What to do with a tool the proxy cannot serve, one of a type other than a function tool "
    "(hosted web or file search, code interpreter, computer use, MCP, Codex's namespace of "
    "sub-agent tools, custom grammar tools, server tools): 'refuse' answers the request with a "
    "400 naming it; 'drop' leaves it out of what the policy sees and records it on the call "
    "(CallRecord.dropped_tools as 'type' or 'type:name')."
)


def hosted_tools_field() -> Any:
    """The ``hosted_tools`` field of a dialect's options model."""
    return Field(default="refuse", description=HOSTED_TOOLS_HELP)


def label(tool: dict[str, Any], kind: str) -> str:
    """How a dropped tool is recorded: its type, and its name when it has one."""
    name = tool.get("name")
    return f"{kind}:{name}" if isinstance(name, str) and name else kind


def hosted(tool: dict[str, Any], kind: str, index: int, policy: HostedTools) -> str:
    """The label of the hosted tool at ``tools[index]`` under ``drop``; a BadRequest under
    ``refuse``."""
    if policy == "drop":
        return label(tool, kind)
    raise BadRequest(
        f"tools[{index}] of type {kind!r} is a hosted tool (a server tool) the proxy cannot run: "
        "it serves function tools only; turn it off in the harness's configuration, or set the "
        "dialect's option hosted_tools: drop to leave it out of what the policy sees",
        param=f"tools[{index}]",
    )
