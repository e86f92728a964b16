"""What dialect plugins share: the stable helpers of the proxy, in one public place.

A dialect imports from here, never from ``lego_rl.proxy.*`` (whose modules may move):

- errors: :func:`require` (a 400 naming the field), :class:`BadRequest`, :func:`openai_error`
  (OpenAI's error shape), :data:`UNSUPPORTED`;
- reading a body: :func:`checked`, :func:`chat_request`, :func:`request_sampling` (max tokens,
  temperature, top-p, stop strings), :func:`stream_flag`, :func:`model_name`,
  :func:`role_of` (with :data:`Role`), :func:`string_field`, :func:`object_field`,
  :func:`text_of`, :func:`shown`, :data:`Settings`;
- hosted tools (a provider's own tools the policy cannot run): :data:`HostedTools`,
  :func:`hosted_tools_field` (the ``hosted_tools`` option), :func:`hosted`;
- reading bodies fast (:class:`~lego_rl.kinds.ParsesBodies`): :func:`field_texts`,
  :func:`read_fields`, :data:`FieldTexts`, :class:`TextMemo`, :class:`MessageMemo` (a
  session's earlier messages parsed once), and for a cache of the dialect's own
  :class:`ByteLRU` with :func:`size_of` and :data:`MiB` (its budget in bytes);
- streaming (:class:`~lego_rl.kinds.StreamingDialect`): :func:`sse`, :func:`fragments`, the
  parser's events :data:`StreamEvent` and :class:`Delta`.

Each keeps its own docstring; the dialects of ``legorl-std`` use them all.
"""

from __future__ import annotations

from lego_rl.proxy.budgets import ByteLRU, MiB, size_of
from lego_rl.proxy.errors import UNSUPPORTED, BadRequest, openai_error, require
from lego_rl.proxy.fast.body_texts import FieldTexts, TextMemo, field_texts, read_fields
from lego_rl.proxy.fast.parse_memo import MessageMemo
from lego_rl.proxy.hosted import HostedTools, hosted, hosted_tools_field
from lego_rl.proxy.parsing import (
    Role,
    Settings,
    chat_request,
    checked,
    model_name,
    object_field,
    request_sampling,
    role_of,
    shown,
    stream_flag,
    string_field,
    text_of,
)
from lego_rl.proxy.streaming import fragments, sse
from lego_rl.proxy.toolcalls import Delta, StreamEvent

__all__ = [
    "UNSUPPORTED",
    "BadRequest",
    "ByteLRU",
    "Delta",
    "FieldTexts",
    "HostedTools",
    "MiB",
    "MessageMemo",
    "Role",
    "Settings",
    "StreamEvent",
    "TextMemo",
    "chat_request",
    "checked",
    "field_texts",
    "fragments",
    "hosted",
    "hosted_tools_field",
    "model_name",
    "object_field",
    "openai_error",
    "read_fields",
    "request_sampling",
    "require",
    "role_of",
    "shown",
    "size_of",
    "sse",
    "stream_flag",
    "string_field",
    "text_of",
]
