"""Grouping unknown exception messages into templates with stable cluster ids.

Three steps, all ours (accuracy: BENCHMARKS.md, ``bench/triage.py``):

1. **Masking** (:func:`tokens`): the values a message quotes are cut out whole (quoted reprs,
   object reprs, dicts, URLs, paths, tuples and lists, hex ids, dtypes, addresses, numbers
   with units) as ``<*>``; the rest is split at whitespace. Linear, at most
   :data:`MAX_MESSAGE_TOKENS` tokens.
2. **Unmasking what repeats** (:func:`refine`): a masked value three distinct messages hold at
   one place, masked nowhere else, is text and *fixed* (never merged into a wildcard); a value
   quoted at many places is *soft* (a group may merge across it where it stands bare).
3. **Merging** (:func:`mine`): equal refined tokens are one signature; then the best-scoring
   merge of two groups of one class, again and again, aligned by their longest common token
   subsequence (:func:`_merge` gives the score). A group of two or more distinct messages
   keeps its constants. Candidate pairs share an end token (:func:`_blocks`).

The cluster id is a hash of the class and the final template. Grouping works on the sorted
set of (signature, message) pairs, never arrival order, so every engine groups alike.
"""

from __future__ import annotations

import hashlib
import heapq
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

WILDCARD = "<*>"
#: Share of a merged template's positions that must stay constant for two groups to merge:
#: constants / (constants + new gaps).
SIMILARITY = 0.5
#: Signatures longer than this many tokens are not compared (a dump; alignment is quadratic).
MAX_TOKENS = 64
#: A block of signatures sharing a positional token pairs each member with only this many
#: before it (in sorted order): a template with thousands of values merges via neighbours.
BLOCK_PAIRS = 48
#: Cells of the table :func:`align` fills at most: past it the middle is one gap (linear).
MAX_CELLS = 1 << 16
#: Tokens a message is split into at most: the rest of a longer message is one last ``<*>``.
MAX_MESSAGE_TOKENS = 256
#: What each word of a gap's run beyond the first :data:`RUN_FREE` costs (a new gap costs 1).
RUN_COST = 0.25
RUN_FREE = 3
#: What each word costs that one side's existing wildcard takes in from the other's constants.
ABSORB_COST = 0.25
#: A masked value held by this many distinct messages at one place is text (:func:`refine`).
REPEATS = 3
#: A word quoted as a value at this many places may be a value where it stands bare.
SOFT_PLACES = 3

_Q = r"(?:[^{q}\\\n]|\\.){{0,4000}}"
_SCALAR = (
    r"-?\d[\d_.]*(?:[eE][-+]?\d+)?|'[^'\n]{0,400}'|\"[^\"\n]{0,400}\""
    r"|<[A-Za-z_][^<>\n]{0,400}>|[A-Za-z_][\w.]{0,200}"
)
_C = r"\s{0,4},\s{0,4}"  # the comma between two items


def _sequence(item: str, opener: str, closer: str, comma: bool) -> str:
    """A bracketed, comma-separated run of ``item``, each an atomic group (no backtracking)."""
    item = f"(?>{item})"
    more = f"{item}(?:{_C}{item}){{0,64}}"
    if comma:
        body = rf"(?:{item}{_C}(?:{more}\s{{0,4}},?)?|{item}(?:{_C}{item}){{1,64}}\s{{0,4}},?)?"
    else:
        body = rf"(?:{more}\s{{0,4}},?)?"
    # A tuple's "(" follows no name: ``f()`` and ``f(a, b)`` are calls, not values.
    before = r"(?<![\w.)\]])" if comma else ""
    return rf"{before}\{opener}\s{{0,4}}{body}\s{{0,4}}\{closer}"


_INNER = (
    _sequence(f"(?:{_SCALAR})", "(", ")", True) + "|" + _sequence(f"(?:{_SCALAR})", "[", "]", False)
)
_ITEM = r"(?:" + _INNER + "|" + _SCALAR + r")"
# One alternation, first match wins; our own bounded pattern over log text, so plain ``re``.
_VALUE = re.compile(
    "|".join(
        (
            r"(?<![\w'])'" + _Q.format(q="'") + r"'(?!\w)",  # 'quoted repr'
            r'(?<![\w"])"' + _Q.format(q='"') + r'"',  # "double quoted"
            # <Foo object at 0x7f3a>, <class 'int'>, <function f at 0x...>: an object's repr.
            r"<[A-Za-z_][\w.]{0,200}(?:[ :][^<>\n]{0,400})?>",
            # Dicts, one level of nesting: {'a': 1, 'b': {'c': 2}}.
            r"\{(?:[^{}\n]|\{[^{}\n]{0,4000}\}){0,4000}\}",
            r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,16}://[^\s'\"<>]{1,4000}[^\s'\"<>.,;:)\]]",  # URL
            # Windows, absolute, home, relative-with-a-slash paths.
            r"(?<![\w/.])(?:[A-Za-z]:\\[^\s'\",;]{1,4000}"
            r"|(?:~|\.{1,2})?/[^\s'\",;:()\[\]]{1,4000}"
            r"|[\w.-]{1,200}(?:/[\w.@+-]{1,200}){1,64}/?)",
            # Tuples and lists of values, one level of nesting: (4096, 1), (2,), ['q', (3, 4)],
            # (): items separated by commas, so "(got 'x')" is words, not a tuple.
            _sequence(_ITEM, "(", ")", True),
            _sequence(_ITEM, "[", "]", False),
            r"\b0[xX][0-9a-fA-F]{1,64}\b",  # 0x7f3a...
            r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b",  # UUID
            r"\b(?=[a-fA-F]{0,63}\d)(?=\d{0,63}[a-fA-F])[0-9a-fA-F]{8,64}\b",  # long hex id
            # dtypes (``torch.bfloat16``); Python's type names are words of the text: not masked.
            r"(?<![\w.])(?:(?:torch|np|numpy|jnp|tf)\.)?(?:u?int|float|bfloat|complex)\d{1,3}"
            r"(?:_[a-z0-9]{1,12})?(?![\w.])",
            r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b",  # IPv4[:port]
            r"\b[\w-]{1,200}(?:\.[\w-]{1,200}){0,16}:\d{2,5}\b",  # host:port
            # Numbers, with a short unit (12ms, 3.5GiB, 8x); not inside a word (int8, fp16).
            r"(?<![A-Za-z_\d])[-+]?\d[\d_]{0,64}(?:\.\d{1,64})?(?:[eE][-+]?\d{1,4})?"
            r"(?:[A-Za-z]{1,3})?(?![A-Za-z_\d])",
        )
    )
)


@dataclass(frozen=True)
class Token:
    """One token of a message: its masked text, what it stood for, and a space before it."""

    masked: str
    value: str
    spaced: bool


def tokens(message: str) -> tuple[Token, ...]:
    """``message`` split into at most :data:`MAX_MESSAGE_TOKENS`, values masked as ``<*>``."""
    out: list[Token] = []
    for start, end, value in _pieces(message):
        spaced = start > 0 and message[start - 1].isspace()
        # Pieces with no space between them are one word (``enc.<*>()``).
        if out and not spaced:
            last = out[-1]
            text = WILDCARD if value else message[start:end]
            out[-1] = Token(last.masked + text, last.value + message[start:end], last.spaced)
        elif len(out) == MAX_MESSAGE_TOKENS - 1:
            out.append(Token(WILDCARD, message[start:].rstrip(), spaced))
            break
        else:
            out.append(Token(WILDCARD if value else message[start:end], message[start:end], spaced))
    return tuple(out)


_WORD = re.compile(r"\S+")


def _pieces(message: str) -> Iterator[tuple[int, int, bool]]:
    """The spans of ``message``'s values and of the words between them, in order, lazily."""
    pos = 0
    while (m := _VALUE.search(message, pos)) is not None:
        start, end = m.span()
        # Quotes around a value are the value's: '[1, 'a b']' masks as '[]' does.
        if start > pos and end < len(message) and message[start - 1] == message[end] in "'\"":
            start, end = start - 1, end + 1
        for word in _WORD.finditer(message, pos, start):
            yield word.start(), word.end(), False
        yield start, end, True
        pos = end
    for word in _WORD.finditer(message, pos):
        yield word.start(), word.end(), False


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
    tokens: tuple[str, ...]  #: the template's tokens (``<*>`` where values vary)
    spacing: tuple[bool, ...]  #: a space before each token

    @property
    def slots(self) -> tuple[int, ...]:
        """Token positions that hold a ``<*>`` (their values vary)."""
        return tuple(k for k, tok in enumerate(self.tokens) if WILDCARD in tok)


def cluster_id(cls: str, template: str) -> str:
    """The stable id of a template: 16 hex digits of a hash of its class and text."""
    digest = hashlib.sha256(f"{cls}\0{template}".encode("utf-8", "surrogatepass")).hexdigest()
    return "t" + digest[:15]


def _wild(token: str) -> bool:
    # Only a token that is all wildcard: ``<*>.__spec__`` and ``<*>:`` keep constant text.
    return token == WILDCARD


@dataclass
class _Group:
    """A cluster being built: its template tokens and spacing, members, distinct messages."""

    tokens: list[str]
    spacing: list[bool]
    members: list[Signature]
    messages: int

    @property
    def confirmed(self) -> bool:
        # Every constant of a template is shared by all its messages: two distinct messages
        # holding the same word in the same place say that word is text, not a value.
        return self.messages >= 2


#: One step of an alignment: (matched, positions in the first, positions in the second).
Step = tuple[bool, list[int], list[int]]


def align(a: Sequence[str], b: Sequence[str]) -> list[Step]:
    """The longest common subsequence of ``a`` and ``b`` as matches and gaps (bounded table)."""
    n, m = len(a), len(b)
    head = 0
    while head < n and head < m and a[head] == b[head]:
        head += 1
    tail = 0
    if (n - head) * (m - head) > MAX_CELLS:
        while tail < n - head and tail < m - head and a[n - 1 - tail] == b[m - 1 - tail]:
            tail += 1
    out: list[Step] = [(True, [k], [k]) for k in range(head)]
    if (n - head - tail) * (m - head - tail) > MAX_CELLS:
        out.append((False, list(range(head, n - tail)), list(range(head, m - tail))))
    else:
        out += _table_align(a, b, head, n - tail, m - tail)
    out += [(True, [n - tail + k], [m - tail + k]) for k in range(tail)]
    return out


def _table_align(a: Sequence[str], b: Sequence[str], start: int, n: int, m: int) -> list[Step]:
    """:func:`align` of ``a[start:n]`` and ``b[start:m]`` by the full table (positions absolute)."""
    # table[i][j]: the longest common subsequence of a[start + i:n] and b[start + j:m].
    table = [[0] * (m - start + 1) for _ in range(start, n + 1)]
    for i in range(n - start - 1, -1, -1):
        row, below, x = table[i], table[i + 1], a[start + i]
        for j in range(m - start - 1, -1, -1):
            row[j] = below[j + 1] + 1 if x == b[start + j] else max(below[j], row[j + 1])
    out: list[Step] = []
    i = j = start
    gap_a: list[int] = []
    gap_b: list[int] = []
    while i < n or j < m:
        if i < n and j < m and a[i] == b[j]:
            if gap_a or gap_b:
                out.append((False, gap_a, gap_b))
                gap_a, gap_b = [], []
            out.append((True, [i], [j]))
            i += 1
            j += 1
        elif j < m and (
            i == n or table[i - start][j - start + 1] >= table[i - start + 1][j - start]
        ):
            gap_b.append(j)
            j += 1
        else:
            gap_a.append(i)
            i += 1
    if gap_a or gap_b:
        out.append((False, gap_a, gap_b))
    return out


def _merge(
    x: _Group, y: _Group, soft: frozenset[str] = frozenset(), fixed: frozenset[str] = frozenset()
) -> tuple[float, list[str], list[bool]] | None:
    """The template of ``x`` and ``y`` together and its score, or None when they must not merge.

    Score: constants / (constants + new gaps + :data:`RUN_COST` per word of a run past
    :data:`RUN_FREE` + :data:`ABSORB_COST` per constant a wildcard takes in). A group of two or
    more distinct messages merges only where its side of every gap is wildcards, tokens holding
    one, or ``soft`` words; no ``fixed`` value goes into a gap.
    """
    tokens: list[str] = []
    spacing: list[bool] = []
    constants = 0
    cost = 0.0
    for matched, gap_x, gap_y in _folded(align(x.tokens, y.tokens), x.tokens):
        if matched:
            k = gap_x[0]
            tokens.append(x.tokens[k])
            spacing.append(x.spacing[k])
            constants += not _wild(x.tokens[k])
            continue
        wild_x = bool(gap_x) and all(_wild(x.tokens[k]) for k in gap_x)
        wild_y = bool(gap_y) and all(_wild(y.tokens[k]) for k in gap_y)
        # A token holding a value (``<*>.__spec__``), or a ``soft`` word, may be the value's text.
        held_x = bool(gap_x) and all(WILDCARD in x.tokens[k] or x.tokens[k] in soft for k in gap_x)
        held_y = bool(gap_y) and all(WILDCARD in y.tokens[k] or y.tokens[k] in soft for k in gap_y)
        if (x.confirmed and not held_x) or (y.confirmed and not held_y):
            return None
        glued = {_glued(gap_x, x.tokens), _glued(gap_y, y.tokens)}
        if x.confirmed and y.confirmed and None not in glued and len(glued) == 2:
            # Both held different text glued after a value while the values changed: two templates.
            return None
        # A value :func:`refine` found to be text: no wildcard takes it in.
        if any(x.tokens[k] in fixed for k in gap_x) or any(y.tokens[k] in fixed for k in gap_y):
            return None
        # A new gap costs one position; a long run of words swallowed costs too.
        run = max(
            sum(not _wild(x.tokens[k]) for k in gap_x), sum(not _wild(y.tokens[k]) for k in gap_y)
        )
        cost += (not (wild_x or wild_y)) + RUN_COST * max(run - RUN_FREE, 0)
        if wild_x != wild_y:
            # Absorbed constants cost something: a message joins its sibling first.
            cost += ABSORB_COST * run
        tokens.append(WILDCARD)
        spacing.append(x.spacing[gap_x[0]] if gap_x else y.spacing[gap_y[0]])
    if constants == 0:
        return None
    return constants / (constants + cost), tokens, spacing


def _glued(gap: list[int], toks: Sequence[str]) -> str | None:
    """The text after the value of a gap of one ``<*>...`` token, else None."""
    if len(gap) == 1 and toks[gap[0]].startswith(WILDCARD) and not _wild(toks[gap[0]]):
        return toks[gap[0]][len(WILDCARD) :]
    return None


def _folded(steps: list[Step], a: Sequence[str]) -> list[Step]:
    """``steps`` with each wildcard match beside a gap folded into that gap (one alignment)."""
    out: list[Step] = []
    for k, step in enumerate(steps):
        matched, at_a, at_b = step
        beside_gap = (out and not out[-1][0]) or (k + 1 < len(steps) and not steps[k + 1][0])
        if matched and _wild(a[at_a[0]]) and beside_gap:
            step = (False, at_a, at_b)
        if out and not out[-1][0] and not step[0]:
            out[-1] = (False, out[-1][1] + step[1], out[-1][2] + step[2])
        else:
            out.append(step)
    return out


def _blocks(sigs: Sequence[Signature]) -> Iterator[tuple[int, int]]:
    """Candidate pairs of ``sigs`` sharing a first, second, last or second-last token."""
    blocks: dict[tuple[int, str], list[int]] = {}
    for k, sig in enumerate(sigs):
        toks = sig.masked
        for place, index in ((0, 0), (1, 1), (2, -1), (3, -2)):
            if len(toks) > abs(index) - (index < 0) and not _wild(toks[index]):
                blocks.setdefault((place, toks[index]), []).append(k)
    seen: set[tuple[int, int]] = set()
    for members in blocks.values():
        for i, b in enumerate(members):
            for a in members[max(0, i - BLOCK_PAIRS) : i]:
                if (a, b) not in seen:
                    seen.add((a, b))
                    yield a, b


def _finder(owner: list[int]) -> Callable[[int], int]:
    def find(k: int) -> int:
        while owner[k] != k:
            owner[k] = owner[owner[k]]
            k = owner[k]
        return k

    return find


def refine(
    pairs: Iterable[tuple[Signature, str]],
) -> tuple[dict[tuple[Signature, str], Signature], frozenset[str], frozenset[str]]:
    """Each (signature, message) with the masked values that are its template's text unmasked.

    Also returned: the *soft* words (quoted at :data:`SOFT_PLACES` or more places) and the
    *fixed* values (unmasked here).
    """
    distinct: dict[tuple[Signature, str], tuple[Token, ...]] = {}
    for sig, message in pairs:
        if (sig, message) not in distinct:
            distinct[sig, message] = tokens(message) if WILDCARD in sig.masked else ()
    counts: dict[tuple[str, int, int, str], int] = {}
    places: dict[str, set[tuple[str, int, int]]] = {}
    for (sig, _), toks in distinct.items():
        for k, tok in enumerate(toks):
            if tok.masked == WILDCARD:
                place = (sig.cls, len(toks), k)
                counts[(*place, tok.value)] = counts.get((*place, tok.value), 0) + 1
                places.setdefault(tok.value, set()).add(place)
    # A value with no letter (``1/1``, ``0``) is a count or a number: it repeats as values do.
    text = {
        key
        for key, n in counts.items()
        if n >= REPEATS and len(places[key[3]]) <= 1 and any(c.isalpha() for c in key[3])
    }
    soft = frozenset(
        word
        for value, where in places.items()
        if len(where) >= SOFT_PLACES
        and value[:1] in "'\""
        and value[-1:] == value[:1]
        and (word := value[1:-1]).isidentifier()
    )
    out: dict[tuple[Signature, str], Signature] = {}
    for (sig, message), toks in distinct.items():
        if not toks:
            out[sig, message] = sig
            continue
        words = tuple(
            tok.value if (sig.cls, len(toks), k, tok.value) in text else word
            for k, (tok, word) in enumerate(zip(toks, sig.masked, strict=True))
        )
        out[sig, message] = Signature(sig.cls, words, sig.spacing)
    return out, soft, frozenset(key[3] for key in text)


def mine(messages: Iterable[tuple[Signature, str]]) -> Mapping[tuple[Signature, str], Cluster]:
    """Group ``messages`` (signature, raw message) into templates (ties: sorted text, not order)."""
    refined, soft, fixed = refine(messages)
    distinct: dict[Signature, set[str]] = {}
    for (_, message), sig in refined.items():
        distinct.setdefault(sig, set()).add(message)
    by_class: dict[str, list[Signature]] = {}
    for sig in distinct:
        by_class.setdefault(sig.cls, []).append(sig)
    found: dict[Signature, Cluster] = {}
    for cls in sorted(by_class):
        sigs = sorted(by_class[cls], key=lambda s: (s.masked, s.spacing))
        groups = [_Group(list(s.masked), list(s.spacing), [s], len(distinct[s])) for s in sigs]
        owner = list(range(len(sigs)))  # union-find parent of each group
        find = _finder(owner)
        heap: list[tuple[float, int, int]] = []
        for a, b in _blocks(sigs):
            if max(len(sigs[a].masked), len(sigs[b].masked)) > MAX_TOKENS:
                continue
            merged = _merge(groups[a], groups[b], soft, fixed)
            if merged is not None and merged[0] >= SIMILARITY:
                heapq.heappush(heap, (-merged[0], a, b))
        while heap:
            score, a, b = heapq.heappop(heap)
            ra, rb = find(a), find(b)
            if ra == rb:
                continue
            merged = _merge(groups[ra], groups[rb], soft, fixed)
            if merged is None or merged[0] < SIMILARITY:
                continue
            if merged[0] < -score - 1e-9:  # the groups changed since: score again, in turn
                heapq.heappush(heap, (-merged[0], a, b))
                continue
            keep, gone = min(ra, rb), max(ra, rb)
            g, h = groups[keep], groups[gone]
            groups[keep] = _Group(
                merged[1], merged[2], g.members + h.members, g.messages + h.messages
            )
            owner[gone] = keep
        for g in (groups[k] for k in range(len(sigs)) if find(k) == k):
            text = join(g.tokens, g.spacing)
            cluster = Cluster(cluster_id(cls, text), cls, text, tuple(g.tokens), tuple(g.spacing))
            for sig in g.members:
                found[sig] = cluster
    return {pair: found[sig] for pair, sig in refined.items()}


def slot_values(message: str, cluster: Cluster) -> tuple[str, ...]:
    """What ``message`` has at each of its cluster's ``<*>`` positions, in order."""
    toks = tokens(message)
    out: list[str] = []
    for matched, at_t, at_m in align(cluster.tokens, [t.masked for t in toks]):
        wild = [k for k in at_t if WILDCARD in cluster.tokens[k]]
        if not wild:
            continue
        if matched:
            out.append(toks[at_m[0]].value)
            continue
        text = join((toks[k].value for k in at_m), [toks[k].spaced for k in at_m]).strip()
        out.extend([text] + [""] * (len(wild) - 1))
    return tuple(out)
