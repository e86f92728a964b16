"""The completion parser: reasoning, content and Qwen3/Hermes tool calls."""

import json

from lego_rl.proxy.toolcalls import parse_completion

CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'


def test_plain_text_is_content():
    parsed = parse_completion("  Hello there.\n")
    assert (parsed.content, parsed.reasoning, parsed.tool_calls) == (
        "Hello there.",
        "",
        [],
    )


def test_reasoning_is_split_off_with_or_without_the_opening_tag():
    assert parse_completion("<think>\nplan it\n</think>\n\nDone.").reasoning == "plan it"
    parsed = parse_completion("plan it\n</think>\n\nDone.", in_reasoning=True)
    assert (parsed.reasoning, parsed.content) == ("plan it", "Done.")


def test_unterminated_reasoning_is_all_reasoning():
    parsed = parse_completion("<think>\nstill thinking")
    assert (parsed.reasoning, parsed.content) == ("still thinking", "")


def test_tool_call_is_parsed_with_json_string_arguments_and_an_id():
    parsed = parse_completion(f"I will list files.\n{CALL}")
    assert parsed.content == "I will list files."
    [call] = parsed.tool_calls
    assert call["type"] == "function"
    assert call["id"].startswith("call_") and len(call["id"]) > 10
    assert call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls -la"}
    assert call["function"]["arguments"] == '{"command": "ls -la"}'


def test_several_tool_calls_keep_order_and_distinct_ids():
    second = CALL.replace("ls -la", "pwd")
    parsed = parse_completion(f"<think>x</think>{CALL}\n{second}")
    assert [json.loads(c["function"]["arguments"])["command"] for c in parsed.tool_calls] == [
        "ls -la",
        "pwd",
    ]
    assert parsed.tool_calls[0]["id"] != parsed.tool_calls[1]["id"]
    assert parsed.content == "" and parsed.reasoning == "x"


def test_arguments_given_as_a_json_string_are_accepted():
    parsed = parse_completion('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>')
    assert json.loads(parsed.tool_calls[0]["function"]["arguments"]) == {"a": 1}


def test_malformed_tool_calls_stay_in_the_content():
    bad_json = '<tool_call>\n{"name": "bash", "arguments": {"command": }\n</tool_call>'
    no_name = '<tool_call>{"arguments": {}}</tool_call>'
    not_object_args = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    for block in (bad_json, no_name, not_object_args):
        parsed = parse_completion(f"before {block}")
        assert parsed.tool_calls == []
        assert parsed.content == f"before {block}"


def test_good_and_bad_blocks_mix():
    bad = "<tool_call>oops</tool_call>"
    parsed = parse_completion(f"{bad}\n{CALL}")
    assert len(parsed.tool_calls) == 1
    assert parsed.content == bad


def test_truncated_tool_call_stays_content():
    parsed = parse_completion('<tool_call>\n{"name": "bash", "argu')
    assert parsed.tool_calls == [] and parsed.content.startswith("<tool_call>")
