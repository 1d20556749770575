"""Grouping unknown exception messages into templates with stable cluster ids.

Two steps, both ours (no template-mining library): measured by ``bench/triage.py`` beside
drain3 on the same messages (353 standard-library templates rendered five times each, plus the
real exception messages of ``reallogs/drci``), this groups 0.71 of them right where drain3
(sim_th 0.5) groups 0.65: drain3 splits a template whenever a quoted value holds spaces. Both
are short of the issue's 0.95: a bare-word value that holds spaces changes a message's length,
which neither handles (see BENCHMARKS.md).

1. **Masking** (:func:`tokens`): the values a message quotes are cut out first, whole, so a
   value with spaces stays one token: quoted reprs (``'a b'``, ``"x"``), URLs, paths, tuples and
   lists (``(4096, 1)``, ``['q', 'k']``), hex ids and addresses (``0x7f3a``, UUIDs, long hex),
   IP addresses and ``host:port``, numbers (with a unit: ``12ms``, ``3.5GiB``). Each becomes
   ``<*>``; the text between them is split at whitespace.
   Pieces with no space between them are one word (``enc.<*>()``).
2. **Merging** (:func:`mine`): messages of the same class whose masked token sequences are
   equal are one signature; signatures of the same class and length then merge, in sorted
   order, into the first cluster whose constant tokens agree on at least :data:`SIMILARITY` of
   the positions where either has one (a bare word value: ``F32`` / ``BF16``, ``cpu`` /
   ``cuda``). A position where members differ becomes ``<*>``.

The cluster id is a hash of the class and the final template, so the same template gives the
same id in every run and on every machine (when the same slots vary: a slot masked in step 1
always does; a bare-word slot does once two values of it have been seen). The grouping works on
the sorted set of signatures, never on arrival order, so ``-j 1``, ``-j 8`` and a Dask cluster
group alike.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

WILDCARD = "<*>"
#: Share of constant positions that must agree for two signatures to be one template. Measured
#: by ``bench/triage.py`` (353 stdlib templates x 5): 0.6 groups 0.71 right, 0.5 0.66 (it merges
#: "invalid mode <*>" with "invalid name <*>").
SIMILARITY = 0.6
#: Signatures longer than this many tokens are not compared (kept as their own cluster): a
#: message that long is a dump, and comparing it costs its length for every cluster.
MAX_TOKENS = 256

_Q = r"(?:[^{q}\\\n]|\\.){{0,4000}}"
_ATOM = r"-?\d[\d_.]*(?:[eE][-+]?\d+)?|None|True|False|'[^'\n]{0,400}'|\"[^\"\n]{0,400}\""
# One alternation, tried left to right at each place: the first that matches wins. Our own
# pattern over log text (not dataset text), bounded repetitions, so plain ``re`` is right.
_VALUE = re.compile(
    "|".join(
        (
            r"(?<![\w'])'" + _Q.format(q="'") + r"'(?!\w)",  # 'quoted repr'
            r'(?<![\w"])"' + _Q.format(q='"') + r'"',  # "double quoted"
            r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,16}://[^\s'\"<>]{1,4000}[^\s'\"<>.,;:)\]]",  # URL
            # Windows, absolute, home, relative-with-a-slash paths.
            r"(?<![\w/.])(?:[A-Za-z]:\\[^\s'\",;]{1,4000}"
            r"|(?:~|\.{1,2})?/[^\s'\",;:()\[\]]{1,4000}"
            r"|[\w.-]{1,200}(?:/[\w.@+-]{1,200}){1,64}/?)",
            # Tuples and lists of values: (4096, 1), (2,), [3, 4], ['q', 'k'], ().
            r"\((?:\s{0,4}(?:" + _ATOM + r")\s{0,4},?){0,256}\s{0,4}\)",
            r"\[(?:\s{0,4}(?:" + _ATOM + r")\s{0,4},?){0,256}\s{0,4}\]",
            r"\b0[xX][0-9a-fA-F]{1,64}\b",  # 0x7f3a...
            r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b",  # UUID
            r"\b(?=[a-fA-F]{0,63}\d)(?=\d{0,63}[a-fA-F])[0-9a-fA-F]{8,64}\b",  # long hex id
            r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b",  # IPv4[:port]
            r"\b[\w-]{1,200}(?:\.[\w-]{1,200}){0,16}:\d{2,5}\b",  # host:port
            # Numbers, with a short unit (12ms, 3.5GiB, 8x); not inside a word (int8, fp16).
            r"(?<![A-Za-z_\d])[-+]?\d[\d_]{0,64}(?:\.\d{1,64})?(?:[eE][-+]?\d{1,4})?"
            r"(?:[A-Za-z]{1,3})?(?![A-Za-z_\d])",
        )
    )
)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Token:
    """One token of a message: its masked text, what it stood for, and a space before it."""

    masked: str
    value: str
    spaced: bool


def tokens(message: str) -> tuple[Token, ...]:
    """``message`` split into tokens, each value masked as ``<*>`` (see the module docstring)."""
    out: list[Token] = []
    pos = 0

    def words(text: str) -> None:
        spaced = False
        for word in _SPACE.split(text):
            if word:
                out.append(Token(word, word, spaced))
            spaced = True

    for m in _VALUE.finditer(message):
        before = message[pos : m.start()]
        words(before)
        spaced = before[-1:].isspace() if before else (pos > 0 and message[pos - 1 : pos].isspace())
        out.append(Token(WILDCARD, m.group(), spaced))
        pos = m.end()
    words(message[pos:])
    # Pieces with no space between them are one word: ``alpha_94()`` and ``enc.<*>()`` are then
    # one differing position each, not words of different lengths.
    joined: list[Token] = []
    for tok in out:
        if joined and not tok.spaced:
            last = joined[-1]
            joined[-1] = Token(last.masked + tok.masked, last.value + tok.value, last.spaced)
        else:
            joined.append(tok)
    return tuple(joined)


def masked(message: str) -> str:
    """The message with its values masked, as one line (what a signature is)."""
    toks = tokens(message)
    return join((t.masked for t in toks), [t.spaced for t in toks])


def join(texts: Iterable[str], spacing: Sequence[bool] | None = None) -> str:
    """Tokens back into text: a space where ``spacing`` says (every gap when it is None)."""
    items = list(texts)
    if spacing is None:
        return " ".join(items)
    return "".join(
        (" " if spaced and k else "") + text
        for k, (text, spaced) in enumerate(zip(items, spacing, strict=True))
    )


@dataclass(frozen=True)
class Signature:
    """A message's class and masked tokens: what equal messages share."""

    cls: str
    masked: tuple[str, ...]
    spacing: tuple[bool, ...]

    @classmethod
    def of(cls, exc_class: str | None, message: str) -> Signature:
        toks = tokens(message)
        return cls(exc_class or "", tuple(t.masked for t in toks), tuple(t.spaced for t in toks))


@dataclass(frozen=True)
class Cluster:
    """A template: its stable id, class and text, and which token positions vary."""

    id: str
    cls: str
    template: str
    slots: tuple[int, ...]  #: word positions that hold a ``<*>`` (their values vary)


def cluster_id(cls: str, template: str) -> str:
    """The stable id of a template: 16 hex digits of a hash of its class and text."""
    digest = hashlib.sha256(f"{cls}\0{template}".encode("utf-8", "surrogatepass")).hexdigest()
    return "t" + digest[:15]


def _agree(a: Sequence[str], b: Sequence[str]) -> float:
    constant = equal = 0
    for x, y in zip(a, b, strict=True):
        if x == WILDCARD and y == WILDCARD:
            continue
        constant += 1
        equal += x == y
    return 1.0 if constant == 0 else equal / constant


def mine(signatures: Iterable[Signature]) -> Mapping[Signature, Cluster]:
    """Group ``signatures`` into templates; every signature's cluster (see the module docstring)."""
    buckets: dict[tuple[str, int], list[Signature]] = {}
    for sig in set(signatures):
        buckets.setdefault((sig.cls, len(sig.masked)), []).append(sig)
    out: dict[Signature, Cluster] = {}
    for (cls, length), sigs in sorted(buckets.items()):
        groups: list[tuple[list[str], list[Signature]]] = []
        for sig in sorted(sigs, key=lambda s: (s.masked, s.spacing)):
            home = None
            if 0 < length <= MAX_TOKENS:
                for template, members in groups:
                    if _agree(template, sig.masked) >= SIMILARITY:
                        home = (template, members)
                        break
            if home is None:
                groups.append((list(sig.masked), [sig]))
                continue
            template, members = home
            for k, tok in enumerate(sig.masked):
                if template[k] != tok:
                    template[k] = WILDCARD
            members.append(sig)
        for template, members in groups:
            text = join(template, members[0].spacing)
            cluster = Cluster(
                cluster_id(cls, text),
                cls,
                text,
                tuple(k for k, tok in enumerate(template) if WILDCARD in tok),
            )
            for sig in members:
                out[sig] = cluster
    return out


def slot_values(message: str, cluster: Cluster) -> tuple[str, ...]:
    """What ``message`` has at its cluster's varying positions, in order."""
    toks = tokens(message)
    return tuple(toks[k].value for k in cluster.slots if k < len(toks))
