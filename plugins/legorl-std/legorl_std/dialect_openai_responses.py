"""The OpenAI Responses dialect ("openai-responses"): POST /v1/responses, as Codex uses it.

``input`` is a string or a list of items: messages (roles user, assistant, system, developer;
``input_text`` / ``output_text`` parts), ``function_call``, ``function_call_output`` and
``reasoning`` items; ``instructions`` become the first system message. Function tools are
served; other tool types (hosted search, computer use...) are refused with a 400 that names
them. The proxy is stateless: ``previous_response_id`` is refused (send the whole input);
``store`` and other bookkeeping fields are ignored. Streaming sends the Responses events with
sequence numbers (response.created, response.in_progress, output_item.added,
content_part.added, output_text.delta/done, function_call_arguments.delta/done,
output_item.done, response.completed).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from lego_rl.kinds import ChatCompletion, ChatMessage, ChatRequest
from lego_rl.proxy.errors import BadRequest, openai_error, require
from lego_rl.proxy.parsing import model_name, request_sampling, text_of
from lego_rl.proxy.streaming import fragments, sse
from lego_rl.proxy.toolcalls import Delta, StreamEvent
from lego_rl.registry import BuildContext

ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def _text_parts(content: Any, param: str) -> str:
    return text_of(content, param, TEXT_PARTS)


class OpenAIResponsesOptions(BaseModel):
    """The openai-responses dialect takes no options."""

    model_config = ConfigDict(extra="forbid")


def _items(raw: Any) -> list[ChatMessage]:
    """Input items -> neutral messages. Consecutive assistant output (reasoning, text, function
    calls) is one assistant turn, as the model produced it."""
    if isinstance(raw, str):
        return [ChatMessage(role="user", content=raw)]
    require(isinstance(raw, list), "input must be a string or a list of items", "input")
    out: list[ChatMessage] = []

    def assistant() -> ChatMessage:
        if not out or out[-1].role != "assistant":
            out.append(ChatMessage(role="assistant"))
        return out[-1]

    for i, item in enumerate(raw):
        param = f"input[{i}]"
        require(isinstance(item, dict), "each input item must be an object", param)
        kind = item.get("type", "message")
        if kind == "message":
            role = ROLES.get(item.get("role"))
            require(
                role is not None,
                f"unsupported role {item.get('role')!r}",
                f"{param}.role",
            )
            text = _text_parts(item.get("content"), f"{param}.content")
            if role == "assistant":
                turn = assistant()
                turn.content = f"{turn.content}\n{text}" if turn.content else text
            else:
                out.append(ChatMessage(role=role, content=text))  # type: ignore[arg-type]
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            assistant().reasoning += _text_parts(parts, f"{param}.content")
        elif kind == "function_call":
            require(isinstance(item.get("name"), str), "function_call needs a name", param)
            arguments = item.get("arguments", "{}")
            require(isinstance(arguments, str), "arguments must be a JSON string", param)
            assistant().tool_calls.append(
                {
                    "id": str(item.get("call_id", "")),
                    "type": "function",
                    "function": {"name": item["name"], "arguments": arguments},
                }
            )
        elif kind == "function_call_output":
            output = item.get("output", "")
            out.append(
                ChatMessage(
                    role="tool",
                    content=output
                    if isinstance(output, str)
                    else _text_parts(output, f"{param}.output"),
                    tool_call_id=str(item.get("call_id", "")),
                )
            )
        else:
            require(False, f"unsupported input item type {kind!r}", f"{param}.type")
    return out


def _tools(raw: Any) -> list[dict[str, Any]]:
    require(isinstance(raw, list), "tools must be a list", "tools")
    tools = []
    for i, tool in enumerate(raw):
        kind = tool.get("type") if isinstance(tool, dict) else None
        require(
            kind == "function" and isinstance(tool.get("name"), str),
            f"tools[{i}] of type {kind!r} cannot be served by the proxy (only function tools; "
            "turn that tool off in the harness's configuration)",
            f"tools[{i}]",
        )
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description") or "",
                    "parameters": tool.get("parameters") or {"type": "object"},
                },
            }
        )
    return tools


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


class OpenAIResponsesDialect:
    """OpenAI Responses: request parsing, response, stream and error shapes."""

    name = "openai-responses"
    routes = (("POST", "/v1/responses"),)

    def parse(self, body: dict[str, Any]) -> ChatRequest:
        if body.get("previous_response_id"):
            raise BadRequest(
                "previous_response_id is not supported: the proxy keeps no conversation state; "
                "send the whole conversation in input (store: false)",
                param="previous_response_id",
            )
        require("input" in body, "input is required", "input")
        messages = _items(body["input"])
        instructions = body.get("instructions")
        if instructions:
            require(
                isinstance(instructions, str),
                "instructions must be a string",
                "instructions",
            )
            messages.insert(0, ChatMessage(role="system", content=instructions))
        require(len(messages) > 0, "input must not be empty", "input")
        stream = body.get("stream", False)
        require(isinstance(stream, bool), "stream must be a boolean", "stream")
        return ChatRequest(
            messages=messages,
            tools=_tools(body["tools"]) if body.get("tools") is not None else [],
            sampling=request_sampling(body, ("max_output_tokens",)),
            model=model_name(body),
            stream=stream,
            raw=body,
        )

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
        out = self._close()
        return out + self._send(
            "response.completed", response=self._response("completed", completion)
        )

    def fail(self, status: int, message: str, kind: str) -> str:
        error = {"code": kind, "message": message}
        failed = {**self._response("failed"), "error": error}
        return self._send("response.failed", response=failed)


def build(options: OpenAIResponsesOptions, ctx: BuildContext) -> OpenAIResponsesDialect:
    """OpenAI Responses API (POST /v1/responses), stateless."""
    return OpenAIResponsesDialect()


def register(register: Any) -> None:
    register("openai-responses", build, options=OpenAIResponsesOptions)
