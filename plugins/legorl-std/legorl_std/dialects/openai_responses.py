"""The OpenAI Responses dialect ("openai-responses"): POST /v1/responses, as Codex uses it.

``input`` is a string or a list of items: messages (roles user, assistant, system, developer;
``input_text`` / ``output_text`` parts), ``function_call``, ``function_call_output`` and
``reasoning`` items; ``instructions`` become the first system message. Function tools are
served; other tool types (hosted web search, computer use, Codex's ``namespace`` of sub-agent
tools...) are refused with a 400 that names them, or dropped from what the policy sees and
recorded on the call, as the option ``hosted_tools`` says (:mod:`lego_rl.proxy.hosted`). The
proxy is stateless: ``previous_response_id`` is refused (send the whole input); ``store`` and
other bookkeeping fields are ignored. Streaming sends the Responses events with sequence
numbers (response.created, response.in_progress, output_item.added, content_part.added,
output_text.delta/done, function_call_arguments.delta/done, output_item.done, then
response.completed, or response.incomplete for a reply cut at its token limit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from lego_rl.dialect_kit import (
    BadRequest,
    ByteLRU,
    Delta,
    FieldTexts,
    HostedTools,
    MessageMemo,
    MiB,
    Role,
    Settings,
    StreamEvent,
    TextMemo,
    chat_request,
    checked,
    field_texts,
    fragments,
    hosted,
    hosted_tools_field,
    model_name,
    object_field,
    openai_error,
    read_fields,
    request_sampling,
    require,
    role_of,
    shown,
    size_of,
    sse,
    stream_flag,
    string_field,
    text_of,
)
from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.registry import BuildContext

T = TypeVar("T")
ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def _text_parts(content: Any, param: str) -> str:
    return text_of(content, param, TEXT_PARTS)


class OpenAIResponsesOptions(BaseModel):
    """Options of the openai-responses dialect."""

    model_config = ConfigDict(extra="forbid")

    hosted_tools: HostedTools = hosted_tools_field()


def _item(item: Any, index: int) -> list[ChatMessage]:
    """One input item as a message; assistant output (text, reasoning, a function call) is a
    piece of an assistant turn that :func:`_turns` joins with its neighbours."""
    param = f"input[{index}]"
    require(isinstance(item, dict), "each input item must be an object", param)
    kind = item.get("type", "message")
    if kind == "message":
        role = role_of(item, ROLES, param)
        text = _text_parts(item.get("content"), f"{param}.content")
        return [ChatMessage(role=role, content=text)]
    if kind == "reasoning":
        parts = item.get("content") or item.get("summary") or []
        return [ChatMessage(role="assistant", reasoning=_text_parts(parts, f"{param}.content"))]
    if kind == "function_call":
        require(isinstance(item.get("name"), str), "function_call needs a name", param)
        arguments = item.get("arguments", "{}")
        require(isinstance(arguments, str), "arguments must be a JSON string", param)
        call = {
            "id": string_field(item, "call_id", param),
            "type": "function",
            "function": {"name": item["name"], "arguments": arguments},
        }
        return [ChatMessage(role="assistant", tool_calls=[call])]
    if kind == "function_call_output":
        output = item.get("output", "")
        text = output if isinstance(output, str) else _text_parts(output, f"{param}.output")
        call_id = string_field(item, "call_id", param)
        return [ChatMessage(role="tool", content=text, tool_call_id=call_id)]
    raise BadRequest(f"unsupported input item type {shown(kind)}", param=f"{param}.type")


def _joined(pieces: Sequence[ChatMessage]) -> ChatMessage:
    """Consecutive assistant pieces as the one turn the model produced: its (non-empty) texts
    joined by newlines, reasoning concatenated, function calls in order."""
    return ChatMessage(
        role="assistant",
        content="\n".join(piece.content for piece in pieces if piece.content),
        reasoning="".join(piece.reasoning for piece in pieces),
        tool_calls=[call for piece in pieces for call in piece.tool_calls],
    )


def _turns(
    pieces: Sequence[ChatMessage],
    joined: Callable[[tuple[ChatMessage, ...]], ChatMessage] = _joined,
) -> list[ChatMessage]:
    """``pieces`` with each run of assistant pieces ``joined`` into one turn."""
    out: list[ChatMessage] = []
    i, n = 0, len(pieces)
    while i < n:
        end = i + 1
        if pieces[i].role == "assistant":
            while end < n and pieces[end].role == "assistant":
                end += 1
        out.append(pieces[i] if end == i + 1 else joined(tuple(pieces[i:end])))
        i = end
    return out


class JoinedTurns:
    """:func:`_joined` for the most recently joined runs of pieces, up to ``budget`` bytes
    (:mod:`lego_rl.proxy.budgets`).

    The message memo hands the same piece objects to every later request of a conversation,
    so a run is found by its pieces' identities: a call joins only its new runs. An entry keeps
    its pieces alive, so no other object can have their ids meanwhile. Turns are shared, never
    to be mutated."""

    def __init__(self, budget: int = 64 * MiB):
        self.runs: ByteLRU[tuple[int, ...], tuple[tuple[ChatMessage, ...], ChatMessage]] = (
            ByteLRU("openai-responses.turns", budget)
        )

    def __call__(self, run: tuple[ChatMessage, ...]) -> ChatMessage:
        key = tuple(map(id, run))
        found = self.runs.get(key)
        if found is not None:
            return found.value[1]
        turn = _joined(run)
        self.runs.put(key, (run, turn), size_of((key, run, turn)))
        return turn


def _items(raw: Any) -> list[ChatMessage]:
    """Input items -> neutral messages. Consecutive assistant output (reasoning, text, function
    calls) is one assistant turn, as the model produced it."""
    if isinstance(raw, str):
        return [ChatMessage(role="user", content=raw)]
    require(isinstance(raw, list), "input must be a string or a list of items", "input")
    return _turns([message for i, item in enumerate(raw) for message in _item(item, i)])


FUNCTION_TOOL = '{"type": "function", "name": ..., "parameters": ...}'


def _tools(raw: Any, policy: HostedTools = "refuse") -> tuple[list[dict[str, Any]], list[str]]:
    """Function tools in the neutral shape, and the labels of the hosted ones dropped."""
    require(isinstance(raw, list), "tools must be a list", "tools")
    tools, dropped = [], []
    for i, tool in enumerate(raw):
        param = f"tools[{i}]"
        require(isinstance(tool, dict), f"each tool must be an object: {FUNCTION_TOOL}", param)
        kind = tool.get("type")
        require(isinstance(kind, str), "a tool's type must be a string", f"{param}.type")
        if kind != "function":
            dropped.append(hosted(tool, kind, i, policy))
            continue
        require(
            isinstance(tool.get("name"), str),
            f"a function tool needs a name: {FUNCTION_TOOL}",
            param,
        )
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": string_field(tool, "description", param),
                    "parameters": object_field(tool, "parameters", param) or {"type": "object"},
                },
            }
        )
    return tools, dropped


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if text else [],
    }


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def call_item(call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call["id"].removeprefix("call_"),
        "call_id": call["id"],
        "name": call["function"]["name"],
        "arguments": call["function"]["arguments"] if status == "completed" else "",
        "status": status,
    }


def _stateless(body: dict[str, Any]) -> None:
    if body.get("previous_response_id"):
        raise BadRequest(
            "previous_response_id is not supported: the proxy keeps no conversation state; "
            "send the whole conversation in input (store: false)",
            param="previous_response_id",
        )


def _instructions(value: Any) -> ChatMessage | None:
    """``instructions`` as the first system message (none when empty)."""
    if not value:
        return None
    require(isinstance(value, str), "instructions must be a string", "instructions")
    return ChatMessage(role="system", content=value)


def _settings(body: dict[str, Any]) -> Settings:
    return request_sampling(body, ("max_output_tokens",)), model_name(body), stream_flag(body)


def _checked_settings(body: dict[str, Any]) -> Settings:
    _stateless(body)
    return _settings(body)


def _kept(parse: Callable[[Any], T]) -> Callable[[Any], tuple[Any, T]]:
    """``parse`` that keeps the value it parsed too (the response echoes some fields)."""
    return lambda value: (value, parse(value))


class OpenAIResponsesDialect:
    """OpenAI Responses: request parsing, response, stream and error shapes. A body is read as
    texts (:meth:`parse_body`): the session's earlier input items, the instructions and the
    tool list are recognised by their bytes, not parsed again."""

    name = "openai-responses"
    routes: Sequence[tuple[str, str]] = (("POST", "/v1/responses"),)

    def __init__(self, options: OpenAIResponsesOptions | None = None) -> None:
        self.options = options or OpenAIResponsesOptions()
        self.memo = MessageMemo(_item, f"{self.name}.messages")
        self.joined = JoinedTurns()
        self.instructions: TextMemo[bytes, tuple[Any, ChatMessage | None]] = TextMemo(
            _kept(_instructions), f"{self.name}.instructions"
        )
        self.tools: TextMemo[bytes, tuple[Any, tuple[list[dict[str, Any]], list[str]]]] = (
            TextMemo(
                _kept(partial(_tools, policy=self.options.hosted_tools)), f"{self.name}.tools"
            )
        )
        self.fields: TextMemo[FieldTexts, tuple[dict[str, Any], Settings | None]] = TextMemo(
            partial(checked, _checked_settings), f"{self.name}.fields", read=read_fields
        )

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        _stateless(body)
        require("input" in body, "input is required", "input")
        messages = _items(body["input"])
        instructions = _instructions(body.get("instructions"))
        if instructions is not None:
            messages.insert(0, instructions)
        require(len(messages) > 0, "input must not be empty", "input")
        stream_flag(body)  # checked before the tools (the order of the errors)
        tools, dropped = (
            _tools(body["tools"], self.options.hosted_tools)
            if body.get("tools") is not None
            else ([], [])
        )
        return chat_request(body, messages, tools, _settings(body), dropped)

    def parse_body(self, body: bytes, scope: str = "") -> ChatRequest | None:
        """:meth:`parse` of a request body's bytes, reading only what earlier requests of
        ``scope`` (the session) did not have, as the other dialects do; None when the body is
        not what the memos can take (``input`` not a non-empty list), or a top-level setting is
        wrong: :meth:`parse` of the body then says what is wrong, in its order."""
        fields = field_texts(body)
        if fields is None or fields.get("input", b"")[:1] != b"[":
            return None
        array = fields.pop("input")
        instructions, tools = fields.pop("instructions", None), fields.pop("tools", None)
        try:
            rest, settings = self.fields.get(tuple(fields.items()))
            if settings is None:
                return None
            pieces = self.memo.parse_array(array, scope)
            if pieces is None:
                return None
            messages = _turns(pieces, self.joined)
            raw = dict(rest)
            if instructions is not None:
                raw["instructions"], system = self.instructions.get(instructions)
                messages = [system, *messages] if system is not None else messages
            tool_list: list[dict[str, Any]] = []
            dropped: list[str] = []
            if tools is not None and tools != b"null":
                raw["tools"], (tool_list, dropped) = self.tools.get(tools)
            elif tools is not None:
                raw["tools"] = None
        except ValueError:
            return None
        return chat_request(raw, messages, tool_list, settings, dropped)

    def response(
        self,
        request: ChatRequest,
        call_id: str,
        *,
        status: str,
        output: list[dict[str, Any]],
        completion: ChatCompletion | None = None,
    ) -> dict[str, Any]:
        """A response object (in progress while streaming, complete at the end)."""
        body = request.raw
        incomplete = completion is not None and completion.finish_reason == "length"
        return {
            "id": f"resp_{call_id}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if incomplete else status,
            "model": request.model,
            "output": output,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"),
            "previous_response_id": None,
            "store": False,
            "metadata": body.get("metadata") or {},
            "usage": None if completion is None else usage(completion),
        }

    def format(
        self, request: ChatRequest, completion: ChatCompletion, call_id: str
    ) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if completion.reasoning:
            output.append(reasoning_item(f"rs_{call_id}", completion.reasoning))
        if completion.content:
            output.append(message_item(f"msg_{call_id}", completion.content))
        output += [call_item(c) for c in completion.tool_calls]
        return self.response(
            request, call_id, status="completed", output=output, completion=completion
        )

    def error(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return openai_error(status, message, kind)

    def stream(self, request: ChatRequest, call_id: str) -> OpenAIResponsesStream:
        return OpenAIResponsesStream(self, request, call_id)


def usage(completion: ChatCompletion) -> dict[str, Any]:
    return {
        "input_tokens": completion.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


class OpenAIResponsesStream:
    """One reply as Responses events; an output item opens when the kind of output changes."""

    def __init__(self, dialect: OpenAIResponsesDialect, request: ChatRequest, call_id: str):
        self.dialect, self.request, self.call_id = dialect, request, call_id
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.open = ""
        self.text = ""

    def _send(self, kind: str, **data: Any) -> str:
        self.sequence += 1
        return sse({"type": kind, "sequence_number": self.sequence - 1, **data}, event=kind)

    def _response(self, status: str, completion: ChatCompletion | None = None) -> dict[str, Any]:
        return self.dialect.response(
            self.request,
            self.call_id,
            status=status,
            output=self.output,
            completion=completion,
        )

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.output[-1]["id"], "output_index": len(self.output) - 1}

    def _close(self) -> str:
        if not self.open:
            return ""
        kind, self.open = self.open, ""
        where, out = self._where(), ""
        if kind == "message":
            part = {"type": "output_text", "text": self.text, "annotations": []}
            out += self._send(
                "response.output_text.done",
                **where,
                content_index=0,
                text=self.text,
                logprobs=[],
            )
            out += self._send("response.content_part.done", **where, content_index=0, part=part)
            self.output[-1] = message_item(where["item_id"], self.text)
        else:
            out += self._send(
                "response.reasoning_text.done", **where, content_index=0, text=self.text
            )
            self.output[-1] = reasoning_item(where["item_id"], self.text)
        return out + self._send(
            "response.output_item.done",
            output_index=where["output_index"],
            item=self.output[-1],
        )

    def _begin(self, kind: str, item: dict[str, Any]) -> str:
        out = self._close()
        self.open, self.text = kind, ""
        self.output.append(item)
        return out + self._send(
            "response.output_item.added", output_index=len(self.output) - 1, item=item
        )

    def start(self, prompt_tokens: int) -> str:
        return self._send("response.created", response=self._response("in_progress")) + self._send(
            "response.in_progress", response=self._response("in_progress")
        )

    def event(self, event: StreamEvent) -> str:
        n = len(self.output)
        if isinstance(event, Delta) and event.kind == "text":
            out = ""
            if self.open != "message":
                out = self._begin(
                    "message",
                    message_item(f"msg_{self.call_id}_{n}", "", "in_progress"),
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                out += self._send(
                    "response.content_part.added",
                    **self._where(),
                    content_index=0,
                    part=part,
                )
            self.text += event.text
            return out + self._send(
                "response.output_text.delta",
                **self._where(),
                content_index=0,
                delta=event.text,
                logprobs=[],
            )
        if isinstance(event, Delta):
            out = ""
            if self.open != "reasoning":
                out = self._begin(
                    "reasoning",
                    {
                        "type": "reasoning",
                        "id": f"rs_{self.call_id}_{n}",
                        "summary": [],
                    },
                )
            self.text += event.text
            return out + self._send(
                "response.reasoning_text.delta",
                **self._where(),
                content_index=0,
                delta=event.text,
            )
        out = self._begin("call", call_item(event.call, "in_progress"))
        self.open = ""
        where = self._where()
        arguments = event.call["function"]["arguments"]
        for piece in fragments(arguments):
            out += self._send("response.function_call_arguments.delta", **where, delta=piece)
        out += self._send("response.function_call_arguments.done", **where, arguments=arguments)
        self.output[-1] = call_item(event.call)
        return out + self._send(
            "response.output_item.done",
            output_index=where["output_index"],
            item=self.output[-1],
        )

    def finish(self, completion: ChatCompletion) -> str:
        """``response.completed``, or ``response.incomplete`` for a reply cut at its token
        limit (its response has status ``incomplete``, as the API sends it)."""
        out = self._close()
        cut = completion.finish_reason == "length"
        kind = "response.incomplete" if cut else "response.completed"
        return out + self._send(kind, response=self._response("completed", completion))

    def fail(self, status: int, message: str, kind: str) -> str:
        error = {"code": kind, "message": message}
        failed = {**self._response("failed"), "error": error}
        return self._send("response.failed", response=failed)


def build(options: OpenAIResponsesOptions, ctx: BuildContext) -> OpenAIResponsesDialect:
    """OpenAI Responses API (POST /v1/responses), stateless."""
    return OpenAIResponsesDialect(options)


def register(register: Any) -> None:
    register("openai-responses", build, options=OpenAIResponsesOptions)
