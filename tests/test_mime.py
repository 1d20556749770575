"""MIME mail (issue 49): ``errkb.parse.mime``, a mailed traceback decoded part by part.

The messages are made by the standard library's ``email`` package, as a cron job's or a CI
system's mailer writes them: quoted-printable bodies (soft line breaks, ``=3D``), base64 bodies
and attachments, multipart/alternative with an HTML twin, a forwarded message, a latin-1
charset. Each is explained exactly, on the line of the ORIGINAL file where the encoded message
begins, by the whole parse and by the large-input route alike; part bombs are one line.
"""

from __future__ import annotations

import email
import email.message
import email.policy
from collections.abc import Iterator
from pathlib import Path

import pytest

import errkb
from errkb.errors import InputError
from errkb.parse import regions
from errkb.parse.mime import MAX_MULTIPARTS, MAX_PARTS, mime_parts
from errkb.parse.sniff import looks_like_container, looks_like_mime, starts_like_container
from tests.cli import QUANTO_LOG

QUANTO = "5c84e15f4be2c1a6"
TEXT = QUANTO_LOG.read_text()
MESSAGE = "ValueError: Quanto layer 'encoder.block.0.layer.0.SelfAttention.q'"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[errkb.KnowledgeBase]:
    with errkb.open(tmp_path_factory.mktemp("mime") / "kb.sqlite3") as opened:
        yield opened


def _mail(body: str, cte: str, charset: str = "utf-8") -> email.message.EmailMessage:
    msg = email.message.EmailMessage(policy=email.policy.SMTP)
    msg["From"] = "cron daemon <root@ci.example.org>"
    msg["To"] = "ml-team@example.org"
    msg["Subject"] = "Cron <root@gpu7> python convert.py"
    msg.set_content(body, cte=cte, charset=charset)
    return msg


def _qp_lines(raw: bytes, decoded: list[int]) -> list[int]:
    """The lines of a one-part quoted-printable mail where its decoded lines ``decoded`` begin.

    Counted here by hand: the body follows the first blank line, and a line ending in ``=``
    continues on the next one (a soft break).
    """
    lines = raw.split(b"\n")
    number = lines.index(b"\r" if lines[0].endswith(b"\r") else b"") + 2
    starts: list[int] = []
    joined = False
    for n in range(number, len(lines) + 1):
        if not joined:
            starts.append(n)
        joined = lines[n - 1].rstrip(b"\r").endswith(b"=")
    return [starts[k - 1] for k in decoded]


#: The lines of the plain log where the record's message begins (cause and wrapper).
PLAIN_LINES = [11, 28]


def _exact(kb: errkb.KnowledgeBase, raw: bytes) -> list[tuple[str, tuple[int, ...]]]:
    return [(m.id, tuple(sorted(set(m.lines)))) for m in kb.explain(raw).exact]


def test_a_quoted_printable_mail_is_explained_on_its_own_lines(kb: errkb.KnowledgeBase) -> None:
    raw = _mail(TEXT, "quoted-printable").as_bytes()
    # The mailer split the long message with soft breaks and wrote '=3D' for '='.
    assert b"=\r\n" in raw or b"=\n" in raw
    assert _exact(kb, TEXT.encode()) == [(QUANTO, tuple(PLAIN_LINES))]
    assert _exact(kb, raw) == [(QUANTO, tuple(_qp_lines(raw, PLAIN_LINES)))]


def test_a_base64_mail_is_decoded_with_the_line_of_the_first_byte(kb: errkb.KnowledgeBase) -> None:
    raw = _mail(TEXT, "base64").as_bytes()
    assert MESSAGE.encode() not in raw
    [(rid, lines)] = _exact(kb, raw)
    assert rid == QUANTO and len(lines) == 2
    # Each line holds the encoded byte the message begins with.
    body = raw.split(b"\n")
    payload = email.message_from_bytes(raw).get_payload(decode=True)
    assert isinstance(payload, bytes)
    at = payload.find(MESSAGE.encode())  # in the decoded body (CRLF line ends)
    first_body = next(n for n, line in enumerate(body, 1) if not line.strip()) + 1
    chars = 0
    for number in range(first_body, len(body) + 1):
        chars += len(body[number - 1].strip())
        if chars * 3 // 4 > at:
            assert lines[0] == number
            break


def test_multipart_alternative_is_read_once_and_attachments_are_read(
    kb: errkb.KnowledgeBase,
) -> None:
    msg = _mail("The nightly conversion failed; log below.\n\n" + TEXT, "quoted-printable")
    msg.add_alternative(f"<html><body><pre>{TEXT}</pre></body></html>", subtype="html")
    raw = msg.as_bytes()
    [(rid, lines)] = _exact(kb, raw)
    assert rid == QUANTO and len(lines) == 2  # the HTML twin is not a second occurrence
    mixed = _mail("See the attached log.\n", "7bit")
    mixed.add_attachment(TEXT.encode(), maintype="text", subtype="plain", filename="convert.log")
    raw = mixed.as_bytes()
    [(rid, lines)] = _exact(kb, raw)
    assert rid == QUANTO and len(lines) == 2
    assert lines[0] > raw[: raw.find(b"convert.log")].count(b"\n")


def test_a_latin1_charset_and_a_forwarded_message_are_decoded() -> None:
    msg = _mail("Café: " + TEXT, "quoted-printable", charset="iso-8859-1")
    [part] = mime_parts(msg.as_string())
    assert part.text.startswith("Café: ") and MESSAGE in part.text
    outer = _mail("Forwarded.\n", "7bit")
    outer.add_attachment(msg)
    texts = [p.text for p in mime_parts(outer.as_string())]
    assert texts[0] == "Forwarded." and MESSAGE in texts[1]


def test_every_route_gives_the_same_report_on_the_original_lines(
    kb: errkb.KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = _mail(TEXT * 40, "quoted-printable").as_bytes()
    small = kb.explain(raw).to_dict()
    monkeypatch.setattr(regions, "NARROW_ABOVE", 4096)  # now a large input: narrowed
    assert starts_like_container(raw)  # never scanned as plain text
    large = kb.explain(raw).to_dict()
    kb.record_scan = False
    try:
        parsed = kb.explain(raw).to_dict()
    finally:
        kb.record_scan = True
    assert small["matches"] == large["matches"] == parsed["matches"]
    [match] = [m for m in small["matches"] if m["confidence"] == "exact"]
    assert match["occurrences"] == 80
    per_copy = TEXT.count("\n")
    decoded = [k * per_copy + line for k in range(40) for line in PLAIN_LINES]
    assert sorted(set(match["lines"])) == _qp_lines(raw, decoded)


@pytest.mark.parametrize(
    "text",
    [
        "INFO: starting\nINFO: Content-Type: text/plain\n\nValueError: x\n",
        "2026-12-07 From: x\nContent-Type: text/plain\n\n",
        "Subject: only one field\n\nbody\n",
        "From: a@b\nTo: c@d\nSubject: no MIME field\n\nbody\n",
        "From: a@b\nMIME-Version: 1.0\nno blank line ends these headers\n",
    ],
)
def test_a_log_is_not_taken_for_a_mail(text: str) -> None:
    assert not looks_like_mime(text)
    assert not looks_like_mime(text.encode())


def test_a_mail_is_a_container() -> None:
    raw = _mail("x\n", "7bit").as_bytes()
    assert looks_like_mime(raw) and looks_like_container(raw) and starts_like_container(raw)


def _multipart(parts: int) -> str:
    head = 'From: a@b\nTo: c@d\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
    return head + "".join(f"--B\nContent-Type: text/plain\n\npart {k}\n" for k in range(parts))


def test_a_part_bomb_is_one_line() -> None:
    assert len(mime_parts(_multipart(MAX_PARTS - 1))) == MAX_PARTS - 1
    with pytest.raises(InputError, match=f"more than {MAX_PARTS} parts; not read"):
        mime_parts(_multipart(1_000_000))


def test_nested_multiparts_past_the_bound_are_one_line() -> None:
    depth = MAX_MULTIPARTS + 1
    text = "From: a@b\nTo: c@d\nMIME-Version: 1.0\n"
    for level in range(depth):
        text += f'Content-Type: multipart/mixed; boundary="L{level}"\n\n--L{level}\n'
    text += "Content-Type: text/plain\n\nValueError: x\n"
    with pytest.raises(InputError, match=f"more than {MAX_MULTIPARTS} multipart boundaries"):
        mime_parts(text)


def test_the_cli_says_a_part_bomb_in_one_line(tmp_path: Path) -> None:
    from tests.cli import run

    bomb = tmp_path / "bomb.eml"
    bomb.write_text(_multipart(200_000))
    result = run(tmp_path / "kb.sqlite3", "explain", str(bomb))
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"errkb: error: input is a MIME message of more than {MAX_PARTS} parts; not read"
    )
