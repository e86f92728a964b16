"""Wrappers that keep what they wrap visible to capability checks.

``isinstance`` against a runtime-checkable Protocol reads attributes statically (Python 3.12:
``inspect.getattr_static``), so a wrapper that forwards through ``__getattr__`` looks as if
it offered none of the wrapped plugin's capabilities. :func:`expose` puts them on the wrapper.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any


def expose(wrapper: object, inner: object, skip: Iterable[str] = ()) -> None:
    """Set on ``wrapper`` each public member of ``inner`` that ``wrapper``'s class does not define
    and ``skip`` does not name: its methods (bound to ``inner``) and its class-level values.
    Properties and instance data are left to ``__getattr__`` (they may change)."""
    own, skipped = type(wrapper), set(skip)
    for name in sorted({*dir(type(inner)), *vars(inner)}):
        if name.startswith("_") or name in skipped or hasattr(own, name):
            continue
        member = inspect.getattr_static(inner, name)
        if isinstance(member, property) or (name in vars(inner) and not callable(member)):
            continue
        value: Any = getattr(inner, name)
        setattr(wrapper, name, value)
