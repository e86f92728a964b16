"""Token ids as a record keeps them: four bytes each, immutable, out of the collector's sight.

A proxy call's prompt is the whole context (tens of thousands of ids) and every call keeps its
own. As a tuple of ints it costs a pointer per id plus an int object per distinct id; each new
call's tuple is built by touching every one of those objects (``prompt + completion + delta``)
and walked once more by the garbage collector before CPython untracks it: ~0.3 ms each for a
25k-id context with the objects out of cache. :class:`TokenIds` keeps the ids in one ``bytes``
(native 32-bit ints): joining is a copy of bytes, the collector never looks inside, and the
memory is half a tuple's before counting the int objects.

It reads like a tuple of ints: ``len``, indexing, slicing (a TokenIds), iteration, ``+`` with
any sequence of ints, equality with tuples and lists of the same ids, hashing. Pydantic fields
of this type take any sequence of ints and serialise as a JSON array.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, TypeVar, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

_CODE: Final = "i"
_SIZE = array(_CODE).itemsize


class TokenIds(Sequence[int]):
    """An immutable sequence of token ids stored as packed 32-bit ints."""

    __slots__ = ("_raw",)
    _raw: bytes

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self._raw = ids._raw if isinstance(ids, TokenIds) else array(_CODE, ids).tobytes()

    @classmethod
    def _of(cls, raw: bytes) -> TokenIds:
        out = cls.__new__(cls)
        out._raw = raw
        return out

    @classmethod
    def of(cls, ids: Iterable[int]) -> TokenIds:
        """``ids`` itself when it is a TokenIds, else a TokenIds of them."""
        return ids if isinstance(ids, TokenIds) else cls(ids)

    def _view(self) -> memoryview:
        return memoryview(self._raw).cast(_CODE)

    def __len__(self) -> int:
        return len(self._raw) // _SIZE

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> TokenIds: ...

    def __getitem__(self, index: int | slice) -> int | TokenIds:
        if not isinstance(index, slice):
            return self._view()[index]
        start, stop, step = index.indices(len(self))
        if step == 1:
            return TokenIds._of(self._raw[start * _SIZE : max(start, stop) * _SIZE])
        return TokenIds(self._view()[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self._view())

    def __reversed__(self) -> Iterator[int]:
        return reversed(self.tolist())

    def __contains__(self, value: object) -> bool:
        return value in self._view()

    def tolist(self) -> list[int]:
        return self._view().tolist()

    @property
    def nbytes(self) -> int:
        """The bytes this sequence keeps alive (the object and its packed ids)."""
        return sys.getsizeof(self) + sys.getsizeof(self._raw)

    def startswith(self, prefix: TokenIds) -> bool:
        """Whether these ids begin with ``prefix`` (a comparison of bytes)."""
        return self._raw.startswith(prefix._raw)

    def __add__(self, other: Iterable[int]) -> TokenIds:
        return TokenIds._of(self._raw + TokenIds.of(other)._raw)

    def __radd__(self, other: Iterable[int]) -> TokenIds:
        return TokenIds._of(TokenIds.of(other)._raw + self._raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenIds):
            return self._raw == other._raw
        if isinstance(other, tuple | list):
            return len(other) == len(self) and self.tolist() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self.tolist()))  # equal to the tuple of the same ids, so hashed alike

    def __repr__(self) -> str:
        return f"TokenIds({self.tolist()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TokenIds._of, (self._raw,))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from_ints = core_schema.no_info_after_validator_function(
            cls, core_schema.list_schema(core_schema.int_schema())
        )
        return core_schema.json_or_python_schema(
            json_schema=from_ints,
            python_schema=core_schema.union_schema(
                [core_schema.is_instance_schema(cls), from_ints]
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(
                TokenIds.tolist,
                return_schema=core_schema.list_schema(core_schema.int_schema()),
            ),
        )


_Prefixed = TypeVar("_Prefixed", "TokenIds", str)


def common_prefix(a: _Prefixed, b: _Prefixed) -> int:
    """How many leading items (ids, characters) ``a`` and ``b`` share: a bisection over
    comparisons of slices, each a comparison of memory."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
