"""W3C Trace Context's `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header) as
text: read what a producer sent, write a span's ids. Pure: no I/O, no OpenTelemetry.
"""

from __future__ import annotations

from typing import NamedTuple

LENGTH = 55  # version 00: "00-" + 32 hex trace id + "-" + 16 hex parent id + "-" + 2 hex flags
MAX_CHARS = 512  # longer text is not read at all (a later version may append fields, never this many)
_HEX = frozenset("0123456789abcdef")


class TraceParent(NamedTuple):
    trace_id: int  # 128 bits, never 0
    span_id: int  # 64 bits (the parent id), never 0
    flags: int  # 8 bits; bit 0: sampled


def parse(text: str | None) -> TraceParent | None:
    """The ids a traceparent carries; None when absent or malformed, which W3C tells a receiver to
    ignore (a new trace starts). A version above 00 is read by 00's layout when what follows it
    starts with "-"; version ff is invalid. Hex must be lower case, as the spec writes it.

    >>> parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").span_id == 0x00f067aa0ba902b7
    True
    >>> parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01") is None
    True
    """
    if text is None or len(text) > MAX_CHARS:
        return None
    text = text.strip(" \t")  # optional whitespace around a header's value
    version = text[:2]
    if len(text) < LENGTH or not set(version) <= _HEX or version == "ff":
        return None
    if len(text) > LENGTH and (version == "00" or text[LENGTH] != "-"):
        return None
    if text[2] != "-" or text[35] != "-" or text[52] != "-":
        return None
    trace_id, span_id, flags = text[3:35], text[36:52], text[53:55]
    if not set(trace_id) <= _HEX or not set(span_id) <= _HEX or not set(flags) <= _HEX:
        return None
    parsed = TraceParent(int(trace_id, 16), int(span_id, 16), int(flags, 16))
    return parsed if parsed.trace_id and parsed.span_id else None


def formatted(trace_id: int, span_id: int, flags: int) -> str:
    """A version 00 traceparent naming this span.

    >>> formatted(0x4bf92f3577b34da6a3ce929d0e0e4736, 0xf067aa0ba902b7, 1)
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    """
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def normalised(text: str | None) -> str | None:
    """What is stored for a producer's traceparent: the version 00 text of a well-formed one
    (a later version's extra fields dropped), else None."""
    parsed = parse(text)
    return None if parsed is None else formatted(*parsed)
