r"""Messages inside quoted C strings: strace's syscall lines and debug dumps, read as lines.

strace prints what a program wrote as C string literals, a traceback's last line in pieces;
a debug dump prints captured stderr as one quoted string with ``\n`` breaks. :func:`unquote_lines`
rewrites such lines before the line parser: a data syscall's data is decoded, joined per
process and descriptor and split at its breaks; any other quoted string with an escaped break
is decoded and split (JSON lines left to the container decoder). Each line made keeps the
number of the input line it begins on. C, Python and Rust escapes are undone to UTF-8. Linear;
a stream's pending text is cut at :data:`MAX_PENDING`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from errkb import _lazy

__all__ = ["MAX_PENDING", "decode_c_string", "unquote_lines"]

#: Characters a stream's unfinished line holds at most before it is cut into a line.
MAX_PENDING = 1 << 16

# An strace data syscall line up to its data's opening quote: pid, time stamp, call, descriptor.
_syscall_re = _lazy.pattern(
    r"(?:\[pid\s{1,8}(?P<pid>\d{1,10})\]\s{1,8}|(?P<pid2>\d{1,10})\s{1,8})?"
    r"(?:\d{1,10}(?::\d{2}:\d{2})?(?:\.\d{1,9})?\s{1,8})?"
    r"(?P<call>write|read|pwrite64|pread64|send|sendto|sendmsg|recv|recvfrom|recvmsg|writev|readv)"
    r"\((?P<fd>\d{1,10}),\s{0,8}(?P<rest>.{0,64}?)\""
)
_escape_re = _lazy.pattern(
    r"\\(?:x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u\{[0-9a-fA-F]{1,6}\}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)",
    re.DOTALL,
)
_SIMPLE = {
    "n": b"\n",
    "t": b"\t",
    "r": b"\r",
    '"': b'"',
    "'": b"'",
    "\\": b"\\",
    "a": b"\x07",
    "b": b"\x08",
    "f": b"\x0c",
    "v": b"\x0b",
    "e": b"\x1b",
    "?": b"?",
}


def decode_c_string(body: str) -> str:
    r"""The text a C-style string literal's body stands for (escapes undone, read as UTF-8)."""
    if "\\" not in body:
        return body
    out = bytearray()
    pos = 0
    for m in _escape_re().finditer(body):
        out += body[pos : m.start()].encode("utf-8", "surrogatepass")
        out += _escape(m.group())
        pos = m.end()
    out += body[pos:].encode("utf-8", "surrogatepass")
    return out.decode("utf-8", "replace")


def _escape(escape: str) -> bytes:
    code = escape[1:]
    head = code[0]
    if head == "x" and len(code) > 1:
        return bytes([int(code[1:], 16)])
    if head in "01234567":
        return bytes([int(code, 8) & 0xFF])
    if head in "uU" and len(code) > 1:
        digits = code[2:-1] if code[1] == "{" else code[1:]
        value = int(digits, 16)
        return chr(value).encode("utf-8", "replace") if value <= 0x10FFFF else b"\xef\xbf\xbd"
    return _SIMPLE.get(head, code.encode("utf-8", "surrogatepass"))


def _quoted(line: str, start: int) -> tuple[str, int, bool]:
    """The body of the string whose opening quote is at ``start``, and its end (or the line's)."""
    pos = start + 1
    n = len(line)
    while pos < n:
        quote = line.find('"', pos)
        if quote < 0:
            break
        backslashes = 0
        back = quote - 1
        while back > start and line[back] == "\\":
            backslashes += 1
            back -= 1
        if backslashes % 2 == 0:
            return line[start + 1 : quote], quote + 1, True
        pos = quote + 1
    return line[start + 1 :], n, False


def unquote_lines(numbers: Iterable[int], physical: Sequence[str]) -> tuple[list[int], list[str]]:
    """``physical`` lines (numbered by ``numbers``) with quoted data read as lines of its own."""
    out_numbers: list[int] = []
    out_lines: list[str] = []
    # (pid, fd) -> (number of the line the pending text began on, the pending text)
    pending: dict[tuple[str, str], tuple[int, list[str], int]] = {}

    syscall = _syscall_re()

    def emit(number: int, text: str) -> None:
        out_numbers.append(number)
        out_lines.append(text)

    for number, line in zip(numbers, physical, strict=False):
        call = syscall.match(line) if '"' in line else None
        if call is not None:
            stream = (call.group("pid") or call.group("pid2") or "", call.group("fd"))
            data = "".join(_syscall_data(line, call.end() - 1, call.group("call")))
            _feed(pending, stream, number, data, emit)
            continue
        if "\\n" in line and '"' in line and not _json_like(line):
            _split_dump(number, line, emit)
            continue
        emit(number, line)
    for first, parts, _size in pending.values():
        if "".join(parts).strip():
            emit(first, "".join(parts))
    order = sorted(range(len(out_numbers)), key=out_numbers.__getitem__)
    return [out_numbers[k] for k in order], [out_lines[k] for k in order]


def _syscall_data(line: str, quote: int, call: str) -> Iterator[str]:
    """The decoded data of an strace line whose first quoted string opens at ``quote``."""
    body, end, _closed = _quoted(line, quote)
    yield decode_c_string(body)
    if call not in ("writev", "readv", "sendmsg", "recvmsg"):
        return
    while (at := line.find('iov_base="', end)) >= 0:  # each further vector's data
        body, end, _closed = _quoted(line, at + len("iov_base="))
        yield decode_c_string(body)


def _feed(
    pending: dict[tuple[str, str], tuple[int, list[str], int]],
    stream: tuple[str, str],
    number: int,
    data: str,
    emit: Callable[[int, str], None],
) -> None:
    """Add one syscall's data to its stream; emit every line it completes."""
    first, parts, size = pending.pop(stream, (number, [], 0))
    pieces = data.split("\n")
    for piece in pieces[:-1]:
        parts.append(piece)
        emit(first, "".join(parts))
        first, parts, size = number, [], 0
    tail = pieces[-1]
    if tail or parts:
        if not parts:
            first = number
        parts.append(tail)
        size += len(tail)
        if size > MAX_PENDING:  # a stream that never ends its line: cut, as a terminal wraps
            emit(first, "".join(parts))
            return
        pending[stream] = (first, parts, size)


def _json_like(line: str) -> bool:
    """Whether ``line`` is (part of) JSON, which the container decoder reads."""
    bare = line.lstrip()
    if '{"' in line or bare[:1] == "[":
        return True
    if bare[:1] != '"':
        return False
    start = len(line) - len(bare)
    _body, end, closed = _quoted(line, start)
    return closed and line[end : end + 64].lstrip()[:1] == ":"


def _split_dump(number: int, line: str, emit: Callable[[int, str], None]) -> None:
    """A line holding quoted strings: each string with an escaped line break read as lines."""
    pos = 0
    rest: list[str] = []
    while (start := line.find('"', pos)) >= 0:
        body, end, _closed = _quoted(line, start)
        if "\\n" not in body:
            rest.append(line[pos:end])
            pos = end
            continue
        rest.append(line[pos:start])
        before = "".join(rest)
        if before.strip():
            emit(number, before.rstrip())
        rest = []
        for text in decode_c_string(body).split("\n"):
            if text.strip():
                emit(number, text)
        pos = end
    after = "".join(rest) + line[pos:]
    if after.strip() and after.strip() not in (")", ",", "}", "]"):
        emit(number, after.strip())
