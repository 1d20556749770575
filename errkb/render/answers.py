"""What every human format of an explanation says the same way: what was cut, one entry per record.

:func:`omitted_note` is the one sentence saying what ``Limits`` left out and how to get it.
:func:`entries` folds matches into one :class:`Entry` per record and file (the answer once,
then its occurrences); :func:`possible_entries` does the same for ``possible`` matches, shown
after the answers and never counted. The JSON does not fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from errkb.report import Confidence, Diagnosis, Match, Report

if TYPE_CHECKING:  # cold explain of a paste never creates the class
    from errkb.report.limits import Truncation


def omitted_note(cut: Truncation | None) -> str | None:
    """One sentence: what a report left out and how to list it; None when nothing was cut."""
    if cut is None:
        return None
    parts: list[str] = []
    if cut.matches:
        parts.append(
            f"{cut.matches:,} more match(es) ({cut.match_occurrences:,} occurrence(s)) of "
            f"{len(cut.records):,} record(s)"
        )
    if cut.unmatched:
        parts.append(
            f"{cut.unmatched:,} more exception(s) with no known record "
            f"({cut.unmatched_occurrences:,} occurrence(s))"
        )
    if cut.lines:
        parts.append(f"{cut.lines:,} line number(s) of listed entries")
    what = "; ".join(parts) if parts else "some entries"
    return (
        f"Not listed: {what} (counts are exact). Run `errkb explain --all` to list every one; "
        "`--format json` counts them in `omitted`."
    )


@dataclass(frozen=True)
class Occurrence:
    """One row of a record's occurrence table: one match of the record."""

    source: str | None  #: the input file, when several were explained together
    lines: tuple[int, ...]
    count: int
    values: tuple[tuple[str, str], ...]  #: only the captures that differ between occurrences
    diagnosis: Diagnosis | None  #: only when it differs from the entry's first one
    root_cause: bool


@dataclass(frozen=True)
class Entry:
    """One record's answer, once, and its occurrences."""

    first: Match  #: the record's first match: its exception, record and documentation
    occurrences: tuple[Occurrence, ...]
    common: tuple[tuple[str, str], ...]  #: captures every occurrence has the same
    varying: tuple[str, ...]  #: the names of the captures that differ
    #: The diagnosis every occurrence shares (by condition and expected value), else None.
    diagnosis: Diagnosis | None

    @property
    def count(self) -> int:
        """Occurrences in all (each match counts its own)."""
        return sum(o.count for o in self.occurrences)

    @property
    def root_cause(self) -> bool:
        return any(o.root_cause for o in self.occurrences)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.source for o in self.occurrences if o.source is not None))


def _same(a: Diagnosis | None, b: Diagnosis | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.condition, a.expected) == (b.condition, b.expected)


def entries(matches: Sequence[Match]) -> tuple[Entry, ...]:
    """One entry per record, in the order each record is first met."""
    groups: dict[str, list[Match]] = {}
    for m in matches:
        groups.setdefault(m.id, []).append(m)
    return tuple(_entry(group) for group in groups.values())


def _entry(group: Sequence[Match]) -> Entry:
    first = group[0]
    names = list(dict.fromkeys(k for m in group for k, _ in m.captures))
    values = {k: {m.capture_dict.get(k) for m in group} for k in names}
    varying = tuple(k for k in names if len(values[k]) > 1)
    common = tuple((k, v) for k, v in first.captures if k not in varying)
    shared = all(_same(m.diagnosis, first.diagnosis) for m in group)
    rows = tuple(
        Occurrence(
            m.source,
            m.lines,
            m.occurrences,
            tuple((k, m.capture_dict.get(k, "")) for k in varying),
            None if shared else m.diagnosis,
            m.root_cause,
        )
        for m in group
    )
    return Entry(first, rows, common, varying, first.diagnosis if shared else None)


def file_answers(report: Report) -> tuple[tuple[str, str, bool], ...]:
    """Each input of a several-file report: (name, its answer in a few words, read or not)."""
    out = []
    for f in report.files:
        if f.error is not None:
            said = f.error if f.error.startswith(("cannot ", "not ")) else f"not read: {f.error}"
            out.append((f.source, said, False))
            continue
        counts: dict[str, int] = {}
        for m in report.exact:
            if m.source == f.source:
                counts[m.slug] = counts.get(m.slug, 0) + m.occurrences
        unknown = sum(1 for u in report.unmatched if u.source == f.source)
        found = ", ".join(f"{slug} ({n}×)" for slug, n in counts.items()) or "no known error"
        tail = f"; {unknown} exception(s) with no known record" if unknown else ""
        out.append((f.source, found + tail, True))
    return tuple(out)


#: The heading of the short section of ``possible`` matches, after the answers.
POSSIBLE_TITLE = "Possible, not counted"
#: A record's prose fields as every format titles them, in the order shown.
PROSE_SECTIONS = (
    ("What it means", "documentation"),
    ("When it happens", "triggerScenarios"),
    ("Common situations", "commonSituations"),
)


def possible_entries(report: Report) -> tuple[Entry, ...]:
    """The entries of ``possible`` matches: shown after the answers, never counted as known."""
    return entries([m for m in report.matches if m.confidence is Confidence.POSSIBLE])


__all__ = [
    "POSSIBLE_TITLE",
    "PROSE_SECTIONS",
    "Entry",
    "Occurrence",
    "entries",
    "file_answers",
    "omitted_note",
    "possible_entries",
]
