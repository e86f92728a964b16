"""Registration of the three model-API dialects legorl-std serves on the proxy."""

from typing import Any

from lego_rl import hookimpl
from legorl_std import dialect_anthropic, dialect_openai_chat, dialect_openai_responses


@hookimpl
def legorl_register_dialect(register: Any) -> None:
    dialect_openai_chat.register(register)
    dialect_anthropic.register(register)
    dialect_openai_responses.register(register)
