"""TokenIds: reads like a tuple of ints, stores packed bytes, hidden from the collector."""

import gc
import pickle

import pytest

from lego_rl.data import CallRecord
from lego_rl.token_ids import TokenIds


def test_reads_like_a_tuple_of_ints():
    ids = TokenIds([5, 151643, 0, 7])
    assert len(ids) == 4 and list(ids) == [5, 151643, 0, 7] and ids.tolist() == [5, 151643, 0, 7]
    assert ids[1] == 151643 and ids[-1] == 7
    assert ids[1:3] == (151643, 0) and isinstance(ids[1:3], TokenIds)
    assert ids[3:1] == () and ids[::2] == [5, 0]
    assert 0 in ids and 8 not in ids
    assert list(reversed(ids)) == [7, 0, 151643, 5]
    assert ids.index(0) == 2 and ids.count(5) == 1
    with pytest.raises(IndexError):
        ids[4]


def test_joins_and_compares_with_any_sequence_of_ints():
    a, b = TokenIds([1, 2]), TokenIds([3])
    assert a + b == (1, 2, 3) and a + [3, 4] == [1, 2, 3, 4] and (0,) + a == (0, 1, 2)
    assert isinstance(a + (3,), TokenIds) and isinstance([0] + a, TokenIds)
    assert (1, 2) == a and a != (2, 1) and a != (1, 2, 3) and a != "12"
    assert hash(a) == hash((1, 2)) and {a: "x"}[(1, 2)] == "x"
    assert (a + b).startswith(a) and not b.startswith(a)
    assert TokenIds.of(a) is a and TokenIds(a) == a
    assert pickle.loads(pickle.dumps(a + b)) == (1, 2, 3)


def test_refuses_what_is_not_a_32_bit_id():
    with pytest.raises(OverflowError):
        TokenIds([2**40])
    with pytest.raises(TypeError):
        TokenIds(["1"])


def test_the_collector_never_walks_the_ids():
    ids = TokenIds(range(50_000))
    assert not gc.is_tracked(ids._raw)
    assert ids._raw in gc.get_referents(ids) and len(gc.get_referents(ids)) == 2  # + its class


def test_a_record_takes_lists_and_serialises_them_back():
    record = CallRecord(
        session="s", index=0, dialect="openai-chat",
        prompt_ids=[1, 2, 3], completion_ids=(4, 5), logprobs=[-0.1, -0.2],
    )
    assert isinstance(record.prompt_ids, TokenIds) and record.completion_ids == (4, 5)
    assert record.model_dump()["prompt_ids"] == [1, 2, 3]
    again = CallRecord.model_validate_json(record.model_dump_json())
    assert again.prompt_ids == record.prompt_ids and isinstance(again.completion_ids, TokenIds)
    with pytest.raises(ValueError):
        CallRecord.model_validate(record.model_dump() | {"prompt_ids": ["a"]})
