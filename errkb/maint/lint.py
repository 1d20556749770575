"""``errkb lint``: everything wrong with a dataset's records, before a version goes live.

:func:`lint` reads records as ingest does and reports every :class:`LintFinding` (record, file,
place, rule id, severity), not only the first: the record contract, duplicate ids, ids and
slugs off upstream's formulas, unknown fields; the messagePattern (compiles under RE2, matches
its own rendered message, captures the right extent as upstream runs it, enough literal text,
generic slots and why); ambiguity (another record's pattern matches this one's message, found
through the matcher's prefilter); the githubUrl. Exit 0 clean, 1 findings, 2 errors.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import unquote as url_unquote

from errkb import records as rec
from errkb.match.matcher import Matcher
from errkb.records import upstream
from errkb.records.patterns import (
    MIN_ANCHOR_CHARS,
    PatternOrigin,
    PatternSpec,
    compile_error,
    compile_re2,
    compile_record,
    unquote,
)
from errkb.records.reader import Item, read_sources
from errkb.records.slots import SlotKind, infer_kinds, sample
from errkb.records.template import Literal, Template, parse_template
from errkb.report.lint import RULE_SEVERITY, LintFinding, LintReport, LintRule, Severity

__all__ = [
    "RULE_SEVERITY",
    "LintFinding",
    "LintReport",
    "LintRule",
    "Severity",
    "lint",
    "sample_values",
]


def sample_values(template: Template, form: str = "v{}x") -> dict[str, str]:
    """Distinctive values for a template's placeholders (``v0x``, ``v1x``, ...)."""
    return {name: form.format(i) for i, name in enumerate(template.names)}


# Two sample sets, as errkb.records.patterns uses: words, and numbers (``\d+``).
_SAMPLE_FORMS = ("v{}x", "1{}7")
_GITHUB = re.compile(
    r"^https://github\.com/(?P<repo>[^/?#]+/[^/?#]+)/blob/(?P<sha>[^/?#]+)/(?P<path>[^?#]+)"
    r"(?:#L(?P<start>\d+)(?:-L(?P<end>\d+))?)?$"
)
_EXPECTED_URL = "https://github.com/<repo>/blob/<analyzedSha>/<filePath>#L<start>-L<end>"
#: Other records named in one ambiguity finding; the rest are counted.
_AMBIGUOUS_LISTED = 3


@dataclass
class _Entry:
    """What the ambiguity pass needs of one record whose pattern could be compiled."""

    index: int  #: the record's position in the findings order
    source: str  #: where the record was read (not the Item: that would keep every record alive)
    location: str
    record_id: str | None
    spec: PatternSpec
    text: str  #: errorMessage rendered with sample values
    label: str  #: how another finding names this record


@dataclass
class _Run:
    """Mutable state of one lint run."""

    ignore: frozenset[LintRule]
    findings: list[tuple[int, int, LintFinding]] = field(default_factory=list)
    entries: list[_Entry] = field(default_factory=list)
    first_seen: dict[str, str] = field(default_factory=dict)
    items: int = 0

    def add(
        self, index: int, source: str, location: str, rid: str | None, rule: LintRule, msg: str
    ) -> None:
        if rule not in self.ignore:
            finding = LintFinding(source, location, rid, rule, msg)
            self.findings.append((index, _RULE_ORDER[rule], finding))


_RULE_ORDER = {rule: i for i, rule in enumerate(LintRule)}


def lint(
    paths: Iterable[str | os.PathLike[str]], *, ignore: Collection[LintRule] = ()
) -> LintReport:
    """Check every record of ``paths`` against every rule but ``ignore``; InputError: no path."""
    run = _Run(frozenset(ignore))
    for index, item in enumerate(read_sources(paths)):
        run.items += 1
        _lint_item(run, index, item)
    if LintRule.AMBIGUOUS not in run.ignore:
        _ambiguity(run)
    run.findings.sort(key=lambda t: (t[0], t[1]))
    return LintReport(tuple(f for _, _, f in run.findings), run.items)


def _lint_item(run: _Run, index: int, item: Item) -> None:
    if item.problem is not None:
        found = item.problem
        message = found.rule if found.json_path == "$" else f"{found.json_path}: {found.rule}"
        run.add(index, item.source, item.location, found.record_id, LintRule.UNREADABLE, message)
        return
    obj = item.obj
    rid = obj.get("id") if isinstance(obj.get("id"), str) else None

    def add(rule: LintRule, message: str) -> None:
        run.add(index, item.source, item.location, rid, rule, message)

    checked = rec.check_record(
        obj, source=item.source, location=item.location, path_prefix=item.path_prefix
    )
    problems = list(checked.problems)
    if item.envelope is not None:
        problems += rec.check_envelope(item.envelope, source=item.source, location=item.location)
    for problem in problems:
        add(LintRule.SCHEMA, f"{problem.json_path}: {problem.rule}")
    for warning in item.warnings:  # duplicate JSON keys: ingest warns, lint refuses
        add(LintRule.SCHEMA, f"{warning.json_path}: {warning.rule}")
    if rid is not None:
        here = item.source + (f" {item.location}" if item.location else "")
        if rid in run.first_seen:
            add(LintRule.DUPLICATE_ID, f"id already used by the record at {run.first_seen[rid]}")
        else:
            run.first_seen[rid] = here
    _formulas(obj, rid, add)
    unknown = rec.unknown_fields(obj)
    if unknown:
        add(LintRule.UNKNOWN_FIELD, f"unknown field(s), kept verbatim: {', '.join(unknown)}")
    if not rec.oversized(obj):  # an oversized pattern is a schema finding; compiling it costs GBs
        _patterns(run, index, item, rid, add)
    _github_url(obj, add)


Add = Callable[[LintRule, str], None]


def _is_str(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value != ""


def _formulas(obj: Mapping[str, Any], rid: str | None, add: Add) -> None:
    code, message = obj.get("errorCode"), obj.get("errorMessage")
    if not (_is_str(message) and (code is None or isinstance(code, str))):
        return
    repo, path = obj.get("repo"), obj.get("filePath")
    if rid is not None and _is_str(repo) and _is_str(path):
        expected = upstream.record_id(repo, code, message, path)
        if rid != expected:
            add(
                LintRule.ID_FORMULA,
                f"id does not follow the upstream formula (expected {expected})",
            )
    slug = obj.get("slug")
    expected_slug = upstream.slug(code, message)
    if isinstance(slug, str) and slug != expected_slug:
        add(
            LintRule.SLUG_FORMULA,
            f"slug does not follow upstream's formula (expected {expected_slug!r})",
        )


def _patterns(run: _Run, index: int, item: Item, rid: str | None, add: Add) -> None:
    obj = item.obj
    message, pattern = obj.get("errorMessage"), obj.get("messagePattern")
    if not (_is_str(message) and _is_str(pattern)):
        return
    template = parse_template(message)
    raw, raw_error = _compile_raw(pattern)
    if raw_error is not None:
        add(LintRule.PATTERN_RE2, f"messagePattern does not compile under RE2: {raw_error}")
    line = obj.get("lineNumber")
    path = obj.get("filePath")
    source = obj.get("sourceCode")
    source_code = source if isinstance(source, str) else None
    spec = compile_record(
        rid or f"#{index}",
        message,
        pattern,
        file_path=path if isinstance(path, str) else "",
        line_number=line if isinstance(line, int) else None,
        source_code=source_code,
    )
    # A pattern that does not compile also "falls back"; it is reported once, above.
    if spec.origin is PatternOrigin.FALLBACK and raw_error is None:
        add(LintRule.PATTERN_MISMATCH, spec.reason or "messagePattern is unusable")
    if raw is not None and template.placeholders:
        wrong = _lazy_capture(raw, template)
        if wrong is not None:
            add(LintRule.LAZY_CAPTURE, wrong)
    if not spec.anchor:
        add(
            LintRule.LOW_SPECIFICITY,
            f"no literal run of {MIN_ANCHOR_CHARS}+ characters: errkb cannot prefilter this "
            "record and never matches it",
        )
    elif template.placeholders and template.literal_length < upstream.MIN_LITERAL_CHARS:
        add(
            LintRule.LOW_SPECIFICITY,
            f"only {template.literal_length} literal character(s) (upstream needs "
            f"{upstream.MIN_LITERAL_CHARS}): the pattern is nearly all wildcards",
        )
    _generic_slots(template, spec, source_code, add)
    label = rid or f"{obj.get('filePath', '?')}"
    text = _typed_sample(template, spec)
    run.entries.append(_Entry(index, item.source, item.location, rid, spec, text, label))


def _generic_slots(template: Template, spec: PatternSpec, source: str | None, add: Add) -> None:
    """Report each placeholder whose slot kind could not be inferred, with the reason."""
    if not template.placeholders:
        return
    if spec.origin is PatternOrigin.MESSAGE_PATTERN:
        add(
            LintRule.GENERIC_SLOT,
            "messagePattern is hand-written, so its groups are used as written and no slot "
            "kind applies to them",
        )
        return
    inferred_kinds = infer_kinds(template, source)
    for placeholder, inferred in zip(template.placeholders, inferred_kinds, strict=True):
        if inferred.kind is SlotKind.GENERIC:
            add(LintRule.GENERIC_SLOT, f"slot {placeholder.raw} stays generic: {inferred.reason}")


def _typed_sample(template: Template, spec: PatternSpec) -> str:
    """The errorMessage rendered with a sample value of each slot's kind (ambiguity's text)."""
    if not spec.kinds:
        return template.render(sample_values(template))
    out: list[str] = []
    index = 0
    for seg in template.segments:
        if isinstance(seg, Literal):
            out.append(seg.text)
        else:
            out.append(sample(SlotKind(spec.kinds[index]), index))
            index += 1
    return "".join(out)


def _compile_raw(pattern: str) -> tuple[Any, str | None]:
    """Compile the messagePattern as written, under RE2: (compiled, None) or (None, why)."""
    try:
        return compile_re2(pattern), None
    except Exception:  # re2 raises its own error type; compile_error words it
        return None, compile_error(pattern) or "rejected by RE2"


def _lazy_capture(compiled: Any, template: Template) -> str | None:
    """Run the raw pattern as upstream does (unanchored search) and compare its captures."""
    if compiled.groups != len(template.placeholders):
        return None  # a group/placeholder mismatch is pattern-mismatch's business
    for form in _SAMPLE_FORMS:
        values = sample_values(template, form)
        match = compiled.search(template.render(values))
        if match is None:
            continue
        for i, placeholder in enumerate(template.placeholders):
            got = match.group(i + 1)
            want = values[placeholder.name]
            if got is None or (unquote(got) if placeholder.is_repr else got) != want:
                return (
                    f"unanchored, messagePattern captures {got!r} for {placeholder.raw} where "
                    f"the message has {want!r} (a lazy (.+?) with nothing after it stops at "
                    "one character)"
                    if i == len(template.placeholders) - 1
                    else f"unanchored, messagePattern captures {got!r} for {placeholder.raw} "
                    f"where the message has {want!r}"
                )
        return None
    return None  # matches no rendering at all: pattern-mismatch reports it


def _github_url(obj: Mapping[str, Any], add: Add) -> None:
    url = obj.get("githubUrl")
    if not isinstance(url, str):
        return
    m = _GITHUB.match(url)
    if m is None:
        add(LintRule.GITHUB_URL, f"githubUrl is not of the form {_EXPECTED_URL} (or #L<line>)")
        return
    problems: list[str] = []
    repo, sha, path = obj.get("repo"), obj.get("analyzedSha"), obj.get("filePath")
    if isinstance(repo, str) and m["repo"] != repo:
        problems.append(f"names repository {m['repo']}, the record's repo is {repo}")
    if isinstance(sha, str) and m["sha"] != sha:
        problems.append(f"is pinned to {m['sha']}, the record's analyzedSha is {sha}")
    if isinstance(path, str) and url_unquote(m["path"]) != path:
        problems.append(f"points at {url_unquote(m['path'])}, the record's filePath is {path}")
    line = obj.get("lineNumber")
    if m["start"] is None:
        if isinstance(line, int):
            problems.append(f"has no #L line anchor for lineNumber {line}")
    else:
        start = int(m["start"])
        end = int(m["end"]) if m["end"] is not None else start
        if end < start:
            problems.append(f"line anchor #L{start}-L{end} is reversed")
        elif isinstance(line, int) and not start <= line <= end:
            anchor = f"#L{start}" + (f"-L{end}" if m["end"] is not None else "")
            problems.append(f"line anchor {anchor} does not cover lineNumber {line}")
    if problems:
        add(LintRule.GITHUB_URL, "githubUrl " + "; ".join(problems))


def _ambiguity(run: _Run) -> None:
    """Report every record whose rendered message another record's pattern also matches."""
    # Records with the same regex and anchor behave identically: verify each such group once.
    group_of: dict[tuple[str, str], int] = {}
    members: list[list[_Entry]] = []
    specs: list[PatternSpec] = []
    for entry in run.entries:
        key = (entry.spec.regex, entry.spec.anchor)
        g = group_of.get(key)
        if g is None:
            g = group_of[key] = len(members)
            members.append([])
            specs.append(entry.spec)
        members[g].append(entry)
    if not specs:
        return
    matcher = Matcher(specs)
    # Identical templates render identical texts: search each text once.
    by_text: dict[str, list[_Entry]] = {}
    for entry in run.entries:
        by_text.setdefault(entry.text, []).append(entry)
    # Texts sharing an anchor share candidates: together they stay in the bounded cache.
    order = sorted(by_text.items(), key=lambda kv: kv[1][0].spec.anchor)
    for text, renderers in order:
        matched: list[_Entry] = []
        for g in sorted(matcher.candidates(text)):
            group = members[g]
            if len(group) == 1 and len(renderers) == 1 and group[0] is renderers[0]:
                continue  # only the record itself: nothing to report, nothing to compile
            if matcher.regex(g).search(text) is not None:
                matched.extend(group)
        if not matched:
            continue
        for entry in renderers:
            others = [m for m in matched if m is not entry]
            if others:
                _report_ambiguous(run, entry, others)


def _report_ambiguous(run: _Run, entry: _Entry, others: list[_Entry]) -> None:
    named = ", ".join(
        f"{o.label} ({o.spec.file_path}"
        + (f":{o.spec.line_number}" if o.spec.line_number else "")
        + ")"
        for o in others[:_AMBIGUOUS_LISTED]
    )
    more = f" and {len(others) - _AMBIGUOUS_LISTED} more" if len(others) > _AMBIGUOUS_LISTED else ""
    message = (
        f"the message rendered with sample values ({_clip(entry.text)!r}) is also matched by "
        f"{len(others)} other record(s): {named}{more}"
    )
    run.add(entry.index, entry.source, entry.location, entry.record_id, LintRule.AMBIGUOUS, message)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
