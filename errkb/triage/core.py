"""The per-log function, the reduce and drafts: what every engine of ``errkb triage`` shares.

See :mod:`errkb.triage` for how they fit together; the engines (:mod:`errkb.triage.pool`,
:mod:`errkb.triage.dask`) import this module, never the package, so nothing imports in a ring.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from errkb import __version__, _json
from errkb.errors import ErrkbError, InputError
from errkb.inputs import JsonBounds
from errkb.report.triage import (
    Example,
    KnownGroup,
    KnownHit,
    LogError,
    LogResult,
    Row,
    TriageReport,
    UnknownGroup,
    UnknownHit,
)
from errkb.triage.templates import WILDCARD, Signature, mine, slot_values

if TYPE_CHECKING:
    from errkb.kb import KnowledgeBase

#: Called after each log: (logs done, logs in all, bytes done).
Progress = Callable[[int, int, int], None]

#: A log larger than this (stored or decompressed) is an error line, not read.
MAX_LOG_BYTES = 128 << 20
#: Examples kept per group, distinct values kept per capture or slot.
MAX_EXAMPLES = 5
MAX_VALUES = 20
#: Where a log's own timestamps are looked for: its first and last this many bytes.
_STAMP_WINDOW = 64 << 10
_STAMP = re.compile(
    rb"(?<!\d)(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    rb"(Z|[+-]\d{2}:?\d{2})?(?!\d)"
)


def expand(paths: Iterable[str]) -> tuple[list[str], list[LogError]]:
    """Files named, found under directories or by globs; sorted, each once (nothing: an error)."""
    found: set[str] = set()
    errors: list[LogError] = []
    for path in paths:
        if any(c in path for c in "*?[") and not os.path.lexists(path):
            matches = sorted(glob.glob(path, recursive=True))
            if not matches:
                errors.append(LogError(path, "no file matches this pattern"))
            for match in matches:
                _add(match, found, errors)
        else:
            _add(path, found, errors)
    return sorted(found), sorted(errors, key=lambda e: e.file)


def _add(path: str, found: set[str], errors: list[LogError]) -> None:
    try:
        st = os.stat(path)
    except OSError as exc:
        errors.append(LogError(path, f"cannot read: {exc.strerror or exc}"))
        return
    if stat.S_ISDIR(st.st_mode):
        for root, dirs, names in os.walk(path):
            dirs.sort()
            found.update(os.path.join(root, name) for name in names)
    else:
        found.add(path)


def _stamp(m: re.Match[bytes]) -> str | None:
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = (m.group(7) or b"0").decode()[:6].ljust(6, "0")
    zone = m.group(8)
    try:
        when = dt.datetime(year, month, day, hour, minute, second, int(frac), tzinfo=dt.UTC)
        if zone and zone != b"Z":
            text = zone.decode().replace(":", "")
            sign = 1 if text[0] == "+" else -1
            when -= sign * dt.timedelta(hours=int(text[1:3]), minutes=int(text[3:5]))
    except ValueError:
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log_times(data: bytes, mtime: float | None) -> tuple[str | None, str | None]:
    """The log's first and last timestamp (its own, else the file's mtime), ISO 8601 in UTC."""
    stamps: list[str] = []
    first = _STAMP.search(data, 0, _STAMP_WINDOW)
    if first is not None and (text := _stamp(first)):
        stamps.append(text)
    for start in (4096, _STAMP_WINDOW):  # the last stamp: from a short tail, else a longer one
        tail_at = max(len(data) - start, first.end() if first is not None else 0)
        last = None
        for last in _STAMP.finditer(data, tail_at):  # noqa: B007 - the last one is kept
            pass
        if last is not None:
            if text := _stamp(last):
                stamps.append(text)
            break
    if stamps:
        return min(stamps), max(stamps)
    if mtime is None:
        return None, None
    when = dt.datetime.fromtimestamp(mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return when, when


def read_log(path: str, limit: int = MAX_LOG_BYTES) -> tuple[bytes, int, float]:
    """A log's bytes (decompressed), its stored size and mtime; InputError when it is no log."""
    from errkb import inputs

    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise InputError(inputs.describe_oserror(path, exc)) from None
    raw = inputs.read_regular(path, limit, what="log")
    data = inputs.decompress_input(raw, path, limit)
    # An empty log is read; binary data and archives are refused with what they are.
    return data, len(raw), mtime


def triage_log(kb: KnowledgeBase, path: str, limit: int = MAX_LOG_BYTES) -> LogResult:
    """Explain one log with ``kb``: its known and unknown errors, or why not; never raises."""
    try:
        data, size, mtime = read_log(path, limit)
    except ErrkbError as exc:
        return LogResult(path, 0, None, None, error=_reason(path, str(exc)))
    first, last = log_times(data, mtime)
    if not data.strip():  # an empty log is read, and holds no error: not an error line
        return LogResult(path, size, first, last, empty=True)
    try:
        report = kb.explain(data)
    except ErrkbError as exc:
        return LogResult(path, size, first, last, error=_reason(path, str(exc)))
    except Exception as exc:  # a crash inside explain is this log's error line, not the run's
        return LogResult(
            path, size, first, last, error=f"explain failed: {type(exc).__name__}: {exc}"
        )
    known = tuple(
        KnownHit(
            m.id,
            m.slug,
            m.exception.cls,
            m.occurrences,
            m.lines,
            m.captures,
            m.exception.message,
            m.diagnosis.explanation if m.diagnosis is not None else None,
            _first_solution(m.record),
            m.record.get("githubUrl") if isinstance(m.record.get("githubUrl"), str) else None,
        )
        for m in report.exact
    )
    unknown = tuple(
        UnknownHit(u.cls, u.message, u.occurrences, u.lines or (u.line,)) for u in report.unmatched
    )
    return LogResult(path, size, first, last, known, unknown, None, report.dataset_version)


def _first_solution(record: Mapping[str, object]) -> str | None:
    """A record's first solution on one line, or None."""
    solutions = record.get("solutions")
    if isinstance(solutions, list) and solutions and isinstance(solutions[0], str):
        return " ".join(solutions[0].split())
    return None


def _reason(path: str, message: str) -> str:
    prefix = f"{path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _capped(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(values)))[:MAX_VALUES]


def _span(results: Sequence[LogResult]) -> tuple[str | None, str | None]:
    firsts = [r.first for r in results if r.first]
    lasts = [r.last for r in results if r.last]
    return (min(firsts) if firsts else None), (max(lasts) if lasts else None)


@dataclass(frozen=True)
class Baseline:
    """What a previous ``--format json`` run held: its records, its clusters and their messages."""

    known: frozenset[str]  #: record ids
    clusters: frozenset[str]  #: unknown groups' cluster ids
    #: Each unknown group's class and example messages, by cluster id (mined with later runs).
    messages: Mapping[str, tuple[str | None, tuple[str, ...]]]


#: What a ``--baseline`` file may be: far beyond a real report, bounding a hostile one.
BASELINE_BOUNDS = JsonBounds(max_bytes=256 << 20, max_depth=16, max_values=4_000_000)


def load_baseline(path: str, bounds: JsonBounds = BASELINE_BOUNDS) -> Baseline:
    """The record ids, cluster ids and messages of a previous ``--format json`` run (bounded)."""
    from errkb import inputs

    name = os.fspath(path)
    value = inputs.read_json(name, bounds, what="triage JSON report")
    if not isinstance(value, dict):
        raise InputError(
            f"{name}: not a triage JSON report: a JSON {type(value).__name__}, not an object"
        )
    known, clusters = (_baseline_ids(name, value, key, field) for key, field in _BASELINE_IDS)
    messages: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    unknown = value.get("unknown")
    for u in unknown if isinstance(unknown, list) else ():
        cls = u.get("class") if isinstance(u.get("class"), str) else None
        examples = u.get("examples")
        texts = [e.get("message") for e in examples or () if isinstance(e, dict)]
        messages[u["cluster"]] = (cls, tuple(t for t in texts if isinstance(t, str)))
    return Baseline(frozenset(known), frozenset(clusters), messages)


#: The lists a baseline is read for, and the id field of each of their items.
_BASELINE_IDS = (("known", "id"), ("unknown", "cluster"))


def _baseline_ids(name: str, report: dict[str, object], key: str, field: str) -> set[str]:
    """The ``field`` of every item of ``report[key]``; InputError unless each has a string one."""
    items = report.get(key)
    if not isinstance(items, list):
        raise InputError(f"{name}: not a triage JSON report: no {key}[] list")
    ids: set[str] = set()
    for index, item in enumerate(items):
        value = item.get(field) if isinstance(item, dict) else None
        if not isinstance(value, str):
            raise InputError(
                f"{name}: not a triage JSON report: {key}[{index}] has no string {field!r}"
            )
        ids.add(value)
    return ids


def reduce(
    results: Iterable[LogResult],
    errors: Iterable[LogError] = (),
    *,
    baseline: str | None = None,
    workers_lost: int = 0,
) -> TriageReport:
    """Fold per-log results into one report; the same whatever order they arrive in."""
    done = sorted(results, key=lambda r: r.file)
    base = load_baseline(baseline) if baseline is not None else None
    errs = list(errors) + [LogError(r.file, r.error) for r in done if r.error is not None]
    ok = [r for r in done if r.error is None]
    rows: list[Row] = []
    known = _known(ok, rows, set(base.known) if base else None)
    unknown = _unknown(ok, rows, base)
    versions = sorted({r.dataset_version for r in ok if r.dataset_version})
    rows.sort(key=lambda r: (r.file, r.line, r.kind, r.id, r.message))
    return TriageReport(
        __version__,
        versions[-1] if versions else None,
        len(done) + sum(1 for e in errors),
        sum(r.bytes for r in done),
        known,
        unknown,
        tuple(sorted(errs, key=lambda e: (e.file, e.reason))),
        tuple(rows),
        baseline,
        workers_lost,
        tuple(r.file for r in ok if r.empty),
    )


def _known(
    results: Sequence[LogResult], rows: list[Row], baseline: set[str] | None
) -> tuple[KnownGroup, ...]:
    by_id: dict[str, list[tuple[LogResult, KnownHit]]] = {}
    for r in results:
        for hit in r.known:
            by_id.setdefault(hit.id, []).append((r, hit))
            rows.extend(
                Row(r.file, n, "known", hit.id, hit.error_class, hit.message) for n in hit.lines
            )
    groups = []
    for rid, pairs in by_id.items():
        logs = sorted({r.file for r, _ in pairs})
        first, last = _span([r for r, _ in pairs])
        names: dict[str, list[str]] = {}
        for _, hit in pairs:
            for name, value in hit.captures:
                names.setdefault(name, []).append(value)
        examples = sorted(
            (Example(r.file, hit.lines[0], hit.message) for r, hit in pairs if hit.lines),
            key=lambda e: (e.file, e.line, e.message),
        )
        hit0 = pairs[0][1]
        groups.append(
            KnownGroup(
                rid,
                hit0.slug,
                hit0.error_class,
                len(logs),
                sum(h.occurrences for _, h in pairs),
                tuple(logs),
                first,
                last,
                tuple((n, _capped(v)) for n, v in sorted(names.items())),
                _capped(h.diagnosis for _, h in pairs if h.diagnosis),
                tuple(examples[:MAX_EXAMPLES]),
                baseline is not None and rid not in baseline,
                next((h.fix for _, h in pairs if h.fix), None),
                next((h.link for _, h in pairs if h.link), None),
            )
        )
    return tuple(sorted(groups, key=lambda g: (-g.logs, -g.occurrences, g.id)))


def _unknown(
    results: Sequence[LogResult], rows: list[Row], baseline: Baseline | None
) -> tuple[UnknownGroup, ...]:
    # Each distinct message is masked once, however many logs repeat it.
    signatures: dict[tuple[str | None, str], Signature] = {}
    for r in results:
        for hit in r.unknown:
            key = (hit.error_class, hit.message)
            if key not in signatures:
                signatures[key] = Signature.of(hit.error_class, hit.message)
    # The baseline's messages are mined with today's, so a group whose values vary is recognised.
    before: dict[tuple[str | None, str], set[str]] = {}
    for cid, (cls, messages) in (baseline.messages if baseline else {}).items():
        for message in messages:
            before.setdefault((cls, message), set()).add(cid)
            if (cls, message) not in signatures:
                signatures[cls, message] = Signature.of(cls, message)
    hits = [
        (r, hit, signatures[hit.error_class, hit.message]) for r in results for hit in r.unknown
    ]
    clusters = mine((sig, message) for (_, message), sig in signatures.items())
    recognised: dict[str, set[str]] = {}
    for (cls, message), cids in before.items():
        recognised.setdefault(clusters[signatures[cls, message], message].id, set()).update(cids)
    by_cluster: dict[str, list[tuple[LogResult, UnknownHit]]] = {}
    for r, hit, sig in hits:
        cluster = clusters[sig, hit.message]
        by_cluster.setdefault(cluster.id, []).append((r, hit))
        rows.extend(
            Row(r.file, n, "unknown", cluster.id, hit.error_class, hit.message) for n in hit.lines
        )
    info = {c.id: c for c in clusters.values()}
    groups = []
    for cid, pairs in by_cluster.items():
        cluster = info[cid]
        slots: list[set[str]] = [set() for _ in cluster.slots]
        for message in {hit.message for _, hit in pairs}:
            for k, value in enumerate(slot_values(message, cluster)):
                slots[k].add(value)
        examples = sorted(
            (Example(r.file, hit.lines[0], hit.message) for r, hit in pairs if hit.lines),
            key=lambda e: (e.file, e.line, e.message),
        )
        first, last = _span([r for r, _ in pairs])
        seen = recognised.get(cid, set()) | ({cid} & baseline.clusters if baseline else set())
        groups.append(
            UnknownGroup(
                cid,
                cluster.cls or None,
                cluster.template,
                sum(h.occurrences for _, h in pairs),
                len({r.file for r, _ in pairs}),
                first,
                last,
                tuple(_capped(s) for s in slots),
                tuple(examples[:MAX_EXAMPLES]),
                baseline is not None and not seen,
                tuple(sorted(seen)),
            )
        )
    return tuple(sorted(groups, key=lambda g: (-g.count, -g.logs, g.cluster)))


#: The source file of a draft made from logs: unknown until a maintainer finds the raise site.
DRAFT_FILE = "UNKNOWN-find-the-raise-site.py"


def draft_record(group: UnknownGroup, *, repo: str = "unknown/unknown") -> dict[str, object]:
    """A draft record for an unknown group, in ``errkb extract``'s draft shape, to complete."""
    from errkb.maint.extract import unreviewed_fields
    from errkb.records import upstream

    parts = group.template.replace("{", "{{").replace("}", "}}").split(WILDCARD)
    message = parts[0] + "".join(f"{{value_{k}}}{p}" for k, p in enumerate(parts[1:], 1))
    example = group.examples[0] if group.examples else None
    where = f"{example.file} line {example.line}" if example else "the triaged logs"
    tags = ["draft", "triage"]
    return {
        "id": upstream.record_id(repo, None, message, DRAFT_FILE),
        "repo": repo,
        "slug": upstream.slug(None, message),
        "errorCode": None,
        "errorMessage": message,
        "messagePattern": upstream.message_pattern(message),
        "errorType": "exception",
        "errorClass": group.error_class,
        "httpStatus": None,
        "severity": "error",
        "filePath": DRAFT_FILE,
        "lineNumber": None,
        "sourceCode": None,
        "sourceCodeStart": None,
        "sourceCodeEnd": None,
        "githubUrl": f"https://github.com/{repo}",
        "documentation": (
            f"Draft: {group.error_class or 'an error'} seen {group.count} time(s) in {group.logs} "
            f"log(s) (first at {where}), grouped by errkb triage (cluster {group.cluster}); "
            "not yet reviewed."
        ),
        **unreviewed_fields(),
        "tags": tags,
        "backgroundTag": None,
        "analyzedSha": "0" * 40,
        "analyzedAt": group.first_seen or "1970-01-01T00:00:00.000Z",
        "schemaVersion": 2,
    }


def iter_results(texts: Iterable[str]) -> Iterator[LogResult]:
    """Per-log results from their JSON texts (what workers, Dask, Ray or Spark hand back)."""
    for text in texts:
        yield LogResult.from_dict(json.loads(text))


def result_text(result: LogResult) -> str:
    """One result as the compact JSON text that crosses process boundaries."""
    return _json.dumps(result.to_dict(), separators=(",", ":"))
