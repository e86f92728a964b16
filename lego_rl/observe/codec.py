"""Binary, compressed encodings of what the run store keeps per token: ids, masks, log-probs
and routed experts.

A blob is ``b"L" + format (1 byte) + dictionary id (uint16 LE)`` and a zlib stream. The stream
holds a payload: a JSON header's length (uint32 LE), the header, then columns back to back,
each a little-endian array the header names (``[name, type, count]``, array type codes).
Token ids are always int32 (the widths stay the same from blob to blob, so a shared
dictionary matches); masks and expert indices take the narrowest unsigned type that holds
them; log-probs are float32 when that keeps every value exactly, float64 otherwise.

The store compresses every blob against one dictionary (``make_dictionary``: the start of the
first blob it writes). Prompts of one harness share their long system prompt, so the ids and
routing of a new trial's prompt are mostly found there: a 1.3k-token quickstart trajectory
takes ~1.4 KB instead of ~34 KB of JSON.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import zlib
from array import array
from collections.abc import Sequence
from typing import Any

from lego_rl.data import Routing, Segment, Trajectory

MAGIC = b"L"
FORMAT = 1
DICTIONARY_BYTES = 32 * 1024
"""zlib's window: more of a dictionary than this is never matched."""
LEVEL = 6
Columns = dict[str, array]


class BlobError(ValueError):
    """A blob this version cannot read (another format, a missing dictionary, damage)."""


def ints(values: Sequence[int], code: str | None = None) -> array:
    """``values`` as the narrowest unsigned array type that holds them (int64 with negatives),
    or as ``code``."""
    if code is None:
        low, high = (min(values), max(values)) if len(values) else (0, 0)
        code = "B" if low >= 0 and high < 256 else "H" if low >= 0 and high < 65536 else "q"
        if code == "q" and -(2**31) <= low and high < 2**31:
            code = "i"
    return array(code, values)


def floats(values: Sequence[float]) -> array:
    """float32 when every value survives it exactly, else float64."""
    single = array("f", values)
    return single if single.tolist() == list(values) else array("d", values)


def _le(column: array) -> bytes:
    if sys.byteorder == "big" and column.itemsize > 1:
        column = array(column.typecode, column)
        column.byteswap()
    return column.tobytes()


def pack(header: dict[str, Any], columns: Columns) -> bytes:
    """Header and columns as one uncompressed payload."""
    header = {**header, "columns": [[k, c.typecode, len(c)] for k, c in columns.items()]}
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([struct.pack("<I", len(head)), head, *(_le(c) for c in columns.values())])


def unpack(payload: bytes) -> tuple[dict[str, Any], Columns]:
    (size,) = struct.unpack_from("<I", payload)
    header = json.loads(payload[4 : 4 + size])
    at, columns = 4 + size, {}
    for name, code, count in header.pop("columns"):
        column = array(code)
        column.frombytes(payload[at : at + count * column.itemsize])
        if sys.byteorder == "big" and column.itemsize > 1:
            column.byteswap()
        at += count * column.itemsize
        columns[name] = column
    return header, columns


def make_dictionary(payload: bytes) -> bytes:
    return payload[:DICTIONARY_BYTES]


def compress(payload: bytes, dictionary: bytes = b"", dictionary_id: int = 0) -> bytes:
    packer = zlib.compressobj(LEVEL, zdict=dictionary) if dictionary else zlib.compressobj(LEVEL)
    head = MAGIC + bytes([FORMAT]) + struct.pack("<H", dictionary_id if dictionary else 0)
    return head + packer.compress(payload) + packer.flush()


def dictionary_of(blob: bytes) -> int:
    """The id of the dictionary ``blob`` was compressed with (0: none)."""
    if blob[:1] != MAGIC or len(blob) < 4:
        raise BlobError("not a run store blob")
    if blob[1] != FORMAT:
        raise BlobError(f"blob format {blob[1]}: this lego-rl reads format {FORMAT}")
    return struct.unpack_from("<H", blob, 2)[0]


def decompress(blob: bytes, dictionary: bytes = b"") -> bytes:
    wanted = dictionary_of(blob)
    if wanted and not dictionary:
        raise BlobError(f"blob needs dictionary {wanted}, which was not given")
    unpacker = zlib.decompressobj(zdict=dictionary) if wanted else zlib.decompressobj()
    try:
        return unpacker.decompress(blob[4:]) + unpacker.flush()
    except zlib.error as exc:
        raise BlobError(f"damaged blob: {exc}") from exc


# ------------------------------------------------------------------------------- routing


def pack_routing(routing: Sequence[Routing | None] | None) -> tuple[Any, Columns]:
    """(header entry, columns) of per-token routing: the ``[layers, k]`` shape, a presence
    byte per token and the expert ids flattened. None: no routing. A list that mixes shapes
    goes into the header as JSON instead (lossless, not compact)."""
    if routing is None:
        return None, {}
    first = next((r for r in routing if r is not None), None)
    if first is None:
        return {"tokens": len(routing)}, {}
    shape = [len(first), len(first[0]) if first else 0]
    flat: list[int] = []
    for r in routing:
        if r is None:
            continue
        if len(r) != shape[0] or any(len(layer) != shape[1] for layer in r):
            return {"json": list(routing)}, {}
        for layer in r:
            flat.extend(layer)
    present = ints([r is not None for r in routing], "B")
    return {"shape": shape}, {"present": present, "experts": ints(flat)}


def unpack_routing(entry: Any, columns: Columns, prefix: str = "") -> list[Routing | None] | None:
    if entry is None:
        return None
    if "json" in entry:
        return entry["json"]
    if "shape" not in entry:
        return [None] * entry["tokens"]
    layers, k = entry["shape"]
    experts, at = columns[prefix + "experts"].tolist(), 0
    out: list[Routing | None] = []
    for present in columns[prefix + "present"]:
        if not present:
            out.append(None)
            continue
        out.append([experts[at + i * k : at + (i + 1) * k] for i in range(layers)])
        at += layers * k
    return out


def _prefixed(prefix: str, columns: Columns) -> Columns:
    return {prefix + k: v for k, v in columns.items()}


# ---------------------------------------------------------------------------- trajectories


def trajectory_payload(trajectory: Trajectory) -> bytes:
    """One trajectory: ids (int32), loss mask, log-probs at trained positions (all of them
    where an untrained position holds one), routing; segments' sizes and calls in the header."""
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    routing: list[Routing | None] = []
    segments = []
    for s in trajectory.segments:
        full = any(m == 0 and (lp != 0.0 or math.copysign(1.0, lp) < 0)
                   for m, lp in zip(s.loss_mask, s.logprobs, strict=False))  # fmt: skip
        full = full or len(s.logprobs) != len(s.loss_mask)
        segments.append({"n": len(s.ids), "mask": len(s.loss_mask), "calls": s.calls,
                         "logprobs": len(s.logprobs) if full else None,
                         "routing": len(s.routing)})  # fmt: skip
        ids.extend(s.ids)
        mask.extend(s.loss_mask)
        logprobs.extend(s.logprobs if full else (lp for m, lp in zip(s.loss_mask, s.logprobs, strict=True) if m))
        routing.extend(s.routing)
    route, route_columns = pack_routing(routing)
    header = {"session": trajectory.session, "subagent": trajectory.subagent,
              "rolled_back": trajectory.rolled_back, "segments": segments,
              "routing": route}  # fmt: skip
    columns = {"ids": ints(ids, "i"), "mask": ints(mask), "logprobs": floats(logprobs)}
    return pack(header, {**columns, **route_columns})


def trajectory_from(payload: bytes) -> Trajectory:
    header, columns = unpack(payload)
    ids, mask = columns["ids"].tolist(), columns["mask"].tolist()
    logprobs = iter(columns["logprobs"].tolist())
    routing = unpack_routing(header["routing"], columns) or []
    segments, at, mask_at, route_at = [], 0, 0, 0
    for s in header["segments"]:
        seg_mask = mask[mask_at : mask_at + s["mask"]]
        if s["logprobs"] is None:  # only trained positions held one
            seg_lp = [next(logprobs) if m else 0.0 for m in seg_mask]
        else:
            seg_lp = [next(logprobs) for _ in range(s["logprobs"])]
        segments.append(
            Segment(
                ids=ids[at : at + s["n"]],
                loss_mask=seg_mask,
                logprobs=seg_lp,
                routing=routing[route_at : route_at + s["routing"]],
                calls=s["calls"],
            )
        )
        at, mask_at, route_at = at + s["n"], mask_at + s["mask"], route_at + s["routing"]
    return Trajectory(session=header["session"], segments=segments,
                      subagent=header["subagent"], rolled_back=header["rolled_back"])  # fmt: skip
