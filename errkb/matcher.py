"""The matcher: which records' patterns match a piece of text, and with which captures.

Built for ~150,000 records: one Aho-Corasick pass over the text finds every record anchor (all
overlapping hits), and only those candidates' regexes are verified, under RE2. Regexes are
compiled lazily, on first use, so building a matcher costs one automaton, not 150,000 regex
compilations. Records whose template has no literal run of at least
``patterns.MIN_ANCHOR_CHARS`` characters are not matched at all: a pattern that is nearly all
wildcards would "explain" any message (``errkb lint`` reports them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from errkb.patterns import PatternSpec, compile_re2, unquote


@dataclass(frozen=True)
class Hit:
    """A record whose full pattern matched a text."""

    spec: PatternSpec
    captures: tuple[tuple[str, str], ...]  #: (placeholder name, value), template order
    start: int  #: where the match starts in the text searched


class Matcher:
    """Prefilter + verify over a fixed set of PatternSpecs. Safe to share between threads."""

    def __init__(self, specs: Iterable[PatternSpec]) -> None:
        import ahocorasick_rs

        self.specs: tuple[PatternSpec, ...] = tuple(specs)
        by_anchor: dict[str, list[int]] = {}
        for index, spec in enumerate(self.specs):
            if spec.anchor:
                by_anchor.setdefault(spec.anchor, []).append(index)
        self._anchors = list(by_anchor)
        self._targets: list[tuple[int, ...]] = [tuple(by_anchor[a]) for a in self._anchors]
        self._automaton: Any = ahocorasick_rs.AhoCorasick(self._anchors) if self._anchors else None
        self._compiled: dict[int, Any] = {}
        self._lock = threading.Lock()
        self.by_id = {spec.record_id: spec for spec in self.specs}
        self._masked: list[str] | None = None

    def masked_templates(self) -> list[str]:
        """Every spec's template with placeholders blanked (for fuzzy suggestions); cached."""
        if self._masked is None:
            from errkb.template import parse_template

            masked = [parse_template(s.template).masked(" ") for s in self.specs]
            with self._lock:
                self._masked = masked
        return self._masked

    def __len__(self) -> int:
        return len(self.specs)

    def candidates(self, text: str) -> set[int]:
        """Indexes of the specs whose anchor occurs in ``text``."""
        if self._automaton is None or not text:
            return set()
        found: set[int] = set()
        for anchor_index, _start, _end in self._automaton.find_matches_as_indexes(
            text, overlapping=True
        ):
            found.update(self._targets[anchor_index])
        return found

    def regex(self, index: int) -> Any:
        compiled = self._compiled.get(index)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(index)
                if compiled is None:
                    compiled = compile_re2(self.specs[index].regex)
                    self._compiled[index] = compiled
        return compiled

    def verify(self, index: int, text: str) -> Hit | None:
        """Match one candidate's full pattern against ``text``."""
        match = self.regex(index).search(text)
        if match is None:
            return None
        spec = self.specs[index]
        captures: dict[str, str] = {}
        for i, name in enumerate(spec.names):
            value = match.group(f"c{i}")
            if value is None or name in captures:
                continue
            captures[name] = unquote(value) if spec.repr_groups[i] else value
        return Hit(spec, tuple(captures.items()), match.start())

    def find(self, text: str, candidates: Sequence[int] | set[int] | None = None) -> list[Hit]:
        """Every record whose pattern matches ``text`` (anchors first, then RE2)."""
        pool = self.candidates(text) if candidates is None else candidates
        hits = [hit for index in sorted(pool) if (hit := self.verify(index, text)) is not None]
        return hits
