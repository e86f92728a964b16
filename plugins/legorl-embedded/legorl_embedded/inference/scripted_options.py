"""Options of the ``scripted`` inference plugin: pydantic only, so registering it is instant."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ScriptToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Tool (function) name, as the harness declares it.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's JSON arguments.")


class ScriptTurn(BaseModel):
    """One reply of the policy: text, then tool calls."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)


class ScriptedInferenceOptions(BaseModel):
    """Options of the ``scripted`` inference plugin."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"turns": [{"text": "Done."}]}]},
    )

    turns: list[ScriptTurn] = Field(
        default_factory=list,
        description="The replies, in call order (call n of the run gets turn n).",
    )
    by_call: list[list[ScriptTurn]] = Field(
        default_factory=list,
        description=(
            "Replies by a session's call number, for concurrent multi-call sessions: a call whose "
            "prompt holds n earlier assistant turns takes the next turn of list n (each list in its "
            "own order), so every session of the run follows one path whatever the interleaving. "
            "When set, `turns` is not used."
        ),
    )
    final_text: str = Field(
        default="Done.", description="The reply to every call after the script has run out."
    )
    device: Literal["cpu", "cuda", "auto"] = Field(
        default="auto", description="Where the scoring model runs; auto picks cuda when a GPU is visible."
    )
