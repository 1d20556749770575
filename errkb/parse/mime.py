r"""MIME mail read part by part: what a cron job or a CI notification mailed, decoded first.

The standard library's ``email`` parses the message; each text part's body is found in the
input's own lines and decoded line by line (quoted-printable over soft breaks, base64), so
every decoded line keeps the number of the input line it begins on.
``multipart/alternative`` is read once (plain text, else the first); ``message/rfc822`` as the
message it is. At most :data:`MAX_PARTS` boundary lines and :data:`MAX_MULTIPARTS` multipart
containers, checked before parsing, else an :class:`~errkb.errors.InputError`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from errkb.errors import InputError

if TYPE_CHECKING:
    from email.message import Message

#: Boundary lines (``--`` + boundary) a message may hold: each is a part the parser makes.
MAX_PARTS = 1000
#: Multipart containers (``boundary=`` parameters) a message may declare; also its depth.
MAX_MULTIPARTS = 32
_boundary_re = re.compile(r"boundary\s*=", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """One decoded text part: its text, and the input line of each of its lines."""

    text: str
    lines: tuple[int, ...]  #: ``lines[i]`` is the input line of the part's line ``i + 1``
    content_type: str  #: ``text/plain``, ``text/html``, ...
    index: int  #: 1-based, in input order


def mime_parts(text: str) -> tuple[Part, ...]:
    """The decoded text parts of the MIME message ``text``, on the input's line numbers."""
    boundaries = len(_boundary_re.findall(text, 0, len(text)))
    if boundaries > MAX_MULTIPARTS:
        raise InputError(
            f"input is a MIME message declaring more than {MAX_MULTIPARTS} multipart "
            "boundaries; not read"
        )
    if boundaries and text.count("\n--") > MAX_PARTS:
        raise InputError(f"input is a MIME message of more than {MAX_PARTS} parts; not read")
    import email.parser
    import email.policy

    message = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    lines = text.split("\n")
    parts: list[Part] = []
    for leaf, start, end in _leaves(message, lines, 0, len(lines)):
        decoded = _decoded(leaf, lines, start, end)
        if decoded is not None:
            body, numbers = decoded
            parts.append(Part(body, numbers, leaf.get_content_type(), len(parts) + 1))
    return tuple(parts)


def _leaves(
    message: Message, lines: Sequence[str], start: int, end: int
) -> Iterator[tuple[Message, int, int]]:
    """Each leaf part and the input lines ``[start, end)`` of its body."""
    body = start
    while body < end and lines[body].rstrip("\r"):
        body += 1  # the entity's headers, up to the blank line
    body += 1
    ctype = message.get_content_type()
    payload = message.get_payload()
    if ctype == "message/rfc822" and isinstance(payload, list) and payload:
        inner = payload[0]
        if not isinstance(inner, str):
            yield from _leaves(inner, lines, body, end)
        return
    if not message.is_multipart() or not isinstance(payload, list):
        yield message, min(body, end), end
        return
    boundary = message.get_boundary()
    if boundary is None:
        return
    delimiter = "--" + boundary
    closing = delimiter + "--"
    marks: list[int] = []
    for index in range(body, end):
        line = lines[index]
        if line.startswith(delimiter):
            bare = line.rstrip("\r \t")
            if bare in (delimiter, closing):
                marks.append(index)
                if bare == closing:
                    break
    spans = list(zip(marks, [*marks[1:], end], strict=True))
    pairs = list(zip(payload, spans, strict=False))
    if ctype == "multipart/alternative" and pairs:
        # One content in several forms: read once, as plain text where it is offered.
        plain = [p for p in pairs if p[0].get_content_type() == "text/plain"]
        pairs = plain[:1] or pairs[:1]
    for part, (mark, after) in pairs:
        yield from _leaves(part, lines, mark + 1, after)


#: Parts read as text besides ``text/*``: attachments named as logs.
_LOG_NAME = re.compile(r"\.(?:log|txt|out|err)$", re.IGNORECASE)


def _decoded(
    part: Message, lines: Sequence[str], start: int, end: int
) -> tuple[str, tuple[int, ...]] | None:
    """A leaf part's body decoded, with the input line of each line; None for no text."""
    ctype = part.get_content_type()
    name = part.get_filename() or ""
    if not (ctype.startswith("text/") or _LOG_NAME.search(name)):
        return None
    charset = part.get_content_charset() or "utf-8"
    encoding = str(part.get("Content-Transfer-Encoding", "7bit")).strip().lower()
    raw = [line.rstrip("\r") for line in lines[start:end]]
    numbers = range(start + 1, end + 1)
    if encoding == "quoted-printable":
        pairs = _quoted_printable(raw, numbers, charset)
    elif encoding == "base64":
        pairs = _base64(raw, numbers, charset)
    else:
        pairs = list(zip(raw, numbers, strict=True))
    while pairs and not pairs[-1][0].strip():
        pairs.pop()  # the blank line before the next boundary belongs to it
    if not pairs:
        return None
    return "\n".join(text for text, _ in pairs), tuple(number for _, number in pairs)


def _text(data: bytes, charset: str) -> str:
    try:
        return data.decode(charset, "replace")
    except LookupError:  # a charset Python does not know: UTF-8, as decode_input reads bytes
        return data.decode("utf-8", "replace")


def _quoted_printable(
    raw: Sequence[str], numbers: Sequence[int], charset: str
) -> list[tuple[str, int]]:
    """Quoted-printable lines joined over soft breaks and decoded, numbered by their first piece."""
    import quopri

    out: list[tuple[str, int]] = []
    pieces: list[str] = []
    first = 0
    for line, number in zip(raw, numbers, strict=True):
        if not pieces:
            first = number
        soft = line.rstrip(" \t").endswith("=")
        pieces.append(line.rstrip(" \t")[:-1] if soft else line)
        if soft:
            continue
        decoded = _text(quopri.decodestring("".join(pieces).encode("utf-8", "replace")), charset)
        out.extend((text, first) for text in decoded.split("\n"))
        pieces = []
    if pieces:
        decoded = _text(quopri.decodestring("".join(pieces).encode("utf-8", "replace")), charset)
        out.extend((text, first) for text in decoded.split("\n"))
    return [(text.rstrip("\r"), number) for text, number in out]


def _base64(raw: Sequence[str], numbers: Sequence[int], charset: str) -> list[tuple[str, int]]:
    """A base64 body decoded, each line numbered by the encoded line holding its first byte."""
    import binascii

    starts: list[int] = []
    chunks: list[str] = []
    chars = 0
    for line in raw:
        starts.append(chars * 3 // 4)
        chunk = "".join(line.split())
        chunks.append(chunk)
        chars += len(chunk)
    joined = "".join(chunks)
    try:
        data = binascii.a2b_base64(joined + "=" * (-len(joined) % 4))
    except (binascii.Error, ValueError):
        return list(zip(raw, numbers, strict=True))
    out: list[tuple[str, int]] = []
    offset = 0
    for piece in data.split(b"\n"):
        at = max(bisect.bisect_right(starts, offset) - 1, 0)
        out.append((_text(piece, charset).rstrip("\r"), numbers[at]))
        offset += len(piece) + 1
    return out
