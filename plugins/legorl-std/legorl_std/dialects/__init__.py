"""Registration of the three model-API dialects legorl-std serves on the proxy."""

from typing import Any

from lego_rl import hookimpl
from legorl_std.dialects import anthropic as dialect_anthropic
from legorl_std.dialects import openai_chat as dialect_openai_chat
from legorl_std.dialects import openai_responses as dialect_openai_responses


@hookimpl
def legorl_register_dialect(register: Any) -> None:
    dialect_openai_chat.register(register)
    dialect_anthropic.register(register)
    dialect_openai_responses.register(register)
