"""The benchmark corpus: 150,000 valid records, built deterministically from a seed.

Real records come first: ``errkb.maint.extract`` over the Python standard library (repo
``python/cpython``) and over every package installed beside errkb (``pypi/<package>``), plus the
three upstream seed records errkb bundles. That gives a few thousand records with real message
templates. ErrLookup holds ~150,000 records over ~800 repositories, so the corpus is topped up
with *variants*: a real template copied into another (made-up) repository with one literal word
changed, so the matcher sees 150k distinct patterns with realistic shapes and anchor overlap.
Variants are marked (tag ``bench-variant``, their documentation names the record they copy).

Every record passes ``errkb.records.check_record`` with no problem and no warning (asserted).
The output directory holds ``records.jsonl`` (one bare record a line), ``tree/`` (a published
tree, as upstream serves it: ``data/manifest.json``, ``index.json.gz``, ``repos.json``,
``repos/{owner}/{name}.json``) and ``info.json`` (counts, and the parameters that make the cache
key). A directory whose ``info.json`` matches the parameters is reused as is.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import hashlib
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import sysconfig
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import publish_tree as publish
from errkb._resources import bundled_dataset_dir
from errkb.maint.extract import Field, Text, build_template, extract, github_url
from errkb.records import check_record, upstream
from errkb.records.template import Literal, Placeholder, parse_template

#: Bump when generation changes: cached corpora of another version are rebuilt.
CORPUS_VERSION = 2
DEFAULT_RECORDS = 150_000
DEFAULT_SEED = 6
QUICK_RECORDS = 4_000
#: The sources ``--quick`` extracts (a few seconds); the full corpus uses every source.
QUICK_SOURCES = ("python/cpython", "pypi/click", "pypi/jsonschema", "pypi/alembic")
#: With an extra sources directory, ``--quick`` also extracts these from it (if there).
QUICK_EXTRA_SOURCES = ("pypi/werkzeug", "pypi/flask", "pypi/django", "pypi/requests")
DATASET_VERSION = "2026-08-28T06:17:29.519Z"
ANALYZED_AT = datetime(2026, 8, 28, 6, 0, 0, tzinfo=UTC)
DEFAULT_OUT = Path(__file__).resolve().parent / "out"
#: About as many repositories as ErrLookup has (real sources included).
VARIANT_REPOS = 800

log = logging.getLogger(__name__)

_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]{3,14}(?![A-Za-z0-9_])")
_OWNERS = (
    "acme", "orbitlabs", "nimbus-ai", "quarkworks", "tensorforge", "lumen", "vectorial",
    "helix-data", "stratus", "ferrite", "kestrel", "polaris-ml", "cobalt", "ember-io", "granite",
    "juniper-labs", "meridian", "nova-compute", "onyx", "parallax", "quill", "riverbed-ai",
    "sable", "tidepool", "umbra", "vertex-run", "willow", "xylem", "yarrow", "zephyr-systems",
)  # fmt: skip
_STEMS = (
    "serve", "infer", "train", "loader", "pipeline", "gateway", "scheduler", "runtime", "kernels",
    "tokenizer", "vision", "audio", "agent", "store", "cache", "bridge", "router", "engine",
    "quant", "export", "convert", "eval", "bench", "dash", "worker", "sync", "index", "search",
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """One tree to extract real records from, under its (fake) repository name."""

    repo: str
    path: Path
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Corpus:
    """A built corpus: where its files are and what it holds."""

    directory: Path
    info: dict[str, Any]

    @property
    def jsonl(self) -> Path:
        return self.directory / "records.jsonl"

    @property
    def tree(self) -> Path:
        return self.directory / "tree"

    def records(self) -> list[dict[str, Any]]:
        with self.jsonl.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]


def default_sources(extra: Path | None = None) -> list[Source]:
    """The standard library, then every package in site-packages (and ``extra``, if given).

    ``extra`` is a directory of packages installed only for the benchmark (``pip install
    --target``, see ``bench.accuracy``); a package there replaces the same name installed
    beside errkb.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    # Test suites raise to test the raising; they are not errors users meet in logs.
    sources = [
        Source(
            "python/cpython",
            stdlib,
            ("test", "tests", "idle_test", "site-packages", "dist-packages", "config-*"),
        )
    ]
    extras = package_sources(extra) if extra is not None else []
    taken = {s.repo for s in extras}
    purelib = Path(sysconfig.get_paths()["purelib"])
    sources += [s for s in package_sources(purelib) if s.repo not in taken]
    return sources + extras


#: Directories ``pip install --target`` writes beside the packages: not packages.
_NOT_PACKAGES = ("bin", "share", "include", "etc", "lib", "man")


def package_sources(directory: Path) -> list[Source]:
    """One source per importable package (or single module) directly under ``directory``."""
    sources: list[Source] = []
    for entry in sorted(directory.iterdir()):
        name = entry.name
        if name.startswith((".", "__")) or name.endswith((".dist-info", ".egg-info", ".pth")):
            continue
        if name in ("errkb", *_NOT_PACKAGES):  # the system under test is not a dataset repo
            continue
        if entry.is_dir() or name.endswith(".py"):
            pkg = name.removesuffix(".py")
            if re.fullmatch(r"[A-Za-z0-9_.-]+", pkg):
                sources.append(Source(f"pypi/{pkg}", entry, ("test", "tests", "testing")))
    return sources


def sources_fingerprint(directory: Path) -> str:
    """What an extra sources directory holds (its distributions and versions), in 12 hex."""
    names = sorted(e.name for e in directory.iterdir() if e.name.endswith(".dist-info"))
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:12]


def _sha(repo: str) -> str:
    """A stable fake commit per repository (records pin one; only its shape matters)."""
    return hashlib.sha1(f"bench:{repo}".encode()).hexdigest()  # noqa: S324 - a fingerprint


def extract_real(sources: Sequence[Source]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Real records of every source (plus the bundled upstream seeds), unique by id."""
    skipped: list[str] = []
    out: list[dict[str, Any]] = []
    per_source: dict[str, int] = {}
    seen: set[str] = set()
    for seed_file in sorted(bundled_dataset_dir().glob("*.txt")):
        record = json.loads(seed_file.read_text(encoding="utf-8"))["record"]
        out.append(record)
        seen.add(record["id"])
    per_source["errlookup seeds"] = len(out)
    for source in sources:
        root = source.path if source.path.is_dir() else source.path.parent
        count = 0
        for record in extract(
            [source.path],
            repo=source.repo,
            sha=_sha(source.repo),
            root=root,
            exclude=source.exclude,
            analyzed_at=ANALYZED_AT,
            on_skip=lambda path, why: skipped.append(path),
        ):
            if record["id"] in seen:
                continue
            seen.add(record["id"])
            out.append(record)
            count += 1
        if count:
            per_source[source.repo] = count
    log.info("extracted %d real records (%d files skipped)", len(out), len(skipped))
    return out, per_source


def _extract_key(sources: Sequence[Source], extra: Path | None) -> str:
    """What extraction depends on: the sources, and errkb's extract and record code."""
    h = hashlib.sha256(
        json.dumps([[s.repo, str(s.path), list(s.exclude)] for s in sources]).encode()
    )
    h.update(sources_fingerprint(extra).encode() if extra is not None else b"-")
    errkb_dir = Path(__file__).resolve().parent.parent / "errkb"
    for sub in ("maint", "records"):
        for path in sorted((errkb_dir / sub).rglob("*.py")):
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cached_extract(
    out: Path, sources: Sequence[Source], extra: Path | None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``extract_real``, kept under ``out/real-*.jsonl`` for corpora of other sizes.

    Only with an extra sources directory (the standard corpus extracts in minutes; the extra
    packages, torch and transformers among them, take much longer).
    """
    if extra is None:
        return extract_real(sources)
    path = out / f"real-{_extract_key(sources, extra)}.jsonl"
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        with path.open(encoding="utf-8") as fh:
            real = [json.loads(line) for line in fh]
        return real, json.loads(meta.read_text(encoding="utf-8"))
    real, per_source = extract_real(sources)
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in real:
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    meta.write_text(json.dumps(per_source), encoding="utf-8")
    tmp.rename(path)
    return real, per_source


def _variant_repos(rng: random.Random, taken: set[str]) -> list[str]:
    repos: list[str] = []
    seen = set(taken)
    while len(repos) < VARIANT_REPOS:
        name = f"{rng.choice(_OWNERS)}/{rng.choice(_STEMS)}-{rng.choice(_STEMS)}"
        if name not in seen:
            seen.add(name)
            repos.append(name)
    return repos


def _vocabulary(records: Sequence[dict[str, Any]]) -> list[str]:
    """Lower-case words of the real templates' literal text: replacements look like prose."""
    words: set[str] = set()
    for record in records:
        for text in parse_template(record["errorMessage"]).literals:
            words.update(w.lower() for w in _WORD.findall(text))
    return sorted(words)


def change_one_word(message: str, rng: random.Random, vocabulary: Sequence[str]) -> str | None:
    """The template with one literal word replaced (placeholders untouched), or None."""
    template = parse_template(message)
    spots = [
        (i, m)
        for i, seg in enumerate(template.segments)
        if isinstance(seg, Literal)
        for m in _WORD.finditer(seg.text)
    ]
    if not spots:
        return None
    index, m = rng.choice(spots)
    word = rng.choice(vocabulary)
    if word == m.group(0).lower():
        return None
    if m.group(0)[0].isupper():
        word = word[0].upper() + word[1:]
    segments = list(template.segments)
    old = segments[index]
    assert isinstance(old, Literal)
    segments[index] = Literal(old.text[: m.start()] + word + old.text[m.end() :])
    if not template.placeholders:
        # A field-less message is written as printed (see errkb.maint.extract), not escaped.
        return "".join(s.text for s in segments if isinstance(s, Literal))
    parts = [Text(s.text) if isinstance(s, Literal) else Field(s.raw) for s in segments]
    new = build_template(parts)
    # The rebuilt template must read back as the same fields around the changed text.
    reread = parse_template(new)
    if [p.raw for p in reread.placeholders] != [
        p.raw for p in template.placeholders if isinstance(p, Placeholder)
    ]:
        return None
    return new


def make_variants(
    real: Sequence[dict[str, Any]], count: int, seed: int
) -> Iterator[dict[str, Any]]:
    """``count`` variants: a real record in another repository with one literal word changed."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(real)
    repos = _variant_repos(rng, {r["repo"] for r in real})
    bases = [r for r in real if _WORD.search(r["errorMessage"])]
    seen_ids = {r["id"] for r in real}
    seen_messages = {r["errorMessage"] for r in real}
    made = 0
    while made < count:
        base = rng.choice(bases)
        message = change_one_word(base["errorMessage"], rng, vocabulary)
        # Distinct templates: two variants with one text would be indistinguishable in a log.
        if message is None or message in seen_messages or not upstream.slug(None, message):
            continue
        repo = rng.choice(repos)
        rid = upstream.record_id(repo, None, message, base["filePath"])
        if rid in seen_ids:
            continue
        seen_ids.add(rid)
        seen_messages.add(message)
        record = copy.deepcopy(base)
        sha = _sha(repo)
        record.update(
            id=rid,
            repo=repo,
            slug=upstream.slug(None, message),
            errorCode=None,
            errorMessage=message,
            messagePattern=upstream.message_pattern(message),
            githubUrl=github_url(
                repo,
                sha,
                base["filePath"],
                base["sourceCodeStart"] or base["lineNumber"] or 1,
                base["sourceCodeEnd"],
            ),
            documentation=(
                f"Benchmark variant of record {base['id']} ({base['repo']}) with one word "
                "changed; not a real error."
            ),
            tags=sorted({*base["tags"], "bench-variant"}),
            analyzedSha=sha,
            analyzedAt=base["analyzedAt"],
        )
        made += 1
        yield record


def _check_chunk(records: list[dict[str, Any]]) -> list[str]:
    """Problems and warnings of a chunk of records, as text (runs in a worker process)."""
    bad: list[str] = []
    for record in records:
        checked = check_record(record, source="bench")
        for p in (*checked.problems, *checked.warnings):
            bad.append(f"{record.get('id')}: {p.json_path}: {p.rule}")
    return bad


def check_all(records: Sequence[dict[str, Any]]) -> None:
    """Assert every record is valid, with no warning (jsonschema is slow: use every CPU)."""
    chunks = [list(records[i : i + 2000]) for i in range(0, len(records), 2000)]
    workers = max(1, min(len(chunks), os.cpu_count() or 1))
    # Building the validator takes ~2 s (format checkers compile grammars): build it once here,
    # so forked workers inherit it instead of each building their own.
    _check_chunk(list(records[:1]))
    if workers == 1:
        bad = [b for chunk in chunks for b in _check_chunk(chunk)]
    else:
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            bad = [b for result in pool.map(_check_chunk, chunks) for b in result]
    assert not bad, f"{len(bad)} invalid records, e.g. {bad[:5]}"


# ---------------------------------------------------------------------------- published tree
def write_tree(root: Path, records: Sequence[dict[str, Any]], dataset_version: str) -> None:
    """Write the published tree of ``records`` as upstream serves it (``errkb.sync.publish``).

    Each repository keeps its records' ``analyzedSha``, as real upstream does.
    """
    publish.write_tree(
        root,
        records,
        dataset_version,
        repo_fields=lambda repo, _body, items: {
            "description": f"{repo} (errkb benchmark corpus)",
            "language": "python",
            "stars": len(items),
        },
    )


# ---------------------------------------------------------------------------- build / cache
def corpus_dir(out: Path, records: int, seed: int, quick: bool, extra: Path | None = None) -> Path:
    tail = f"-x{sources_fingerprint(extra)}" if extra is not None else ""
    return out / f"corpus-n{records}-s{seed}{'-quick' if quick else ''}{tail}"


def _key(records: int, seed: int, quick: bool, extra: Path | None = None) -> dict[str, Any]:
    key: dict[str, Any] = {"version": CORPUS_VERSION, "size": records, "seed": seed, "quick": quick}
    if extra is not None:
        key["extraSources"] = sources_fingerprint(extra)
    return key


def build_corpus(
    out: Path = DEFAULT_OUT,
    *,
    records: int = DEFAULT_RECORDS,
    seed: int = DEFAULT_SEED,
    quick: bool = False,
    extra: Path | None = None,
) -> Corpus:
    """Build (or reuse) the corpus of ``records`` records for ``seed``; see the module doc.

    ``extra``: a directory of packages installed for the benchmark, extracted too.
    """
    directory = corpus_dir(out, records, seed, quick, extra)
    info_path = directory / "info.json"
    key = _key(records, seed, quick, extra)
    if info_path.exists():
        info = json.loads(info_path.read_text(encoding="utf-8"))
        if {k: info.get(k) for k in key} == key:
            return Corpus(directory, info)
    started = time.monotonic()
    sources = default_sources(extra)
    if quick:
        wanted = QUICK_SOURCES + (QUICK_EXTRA_SOURCES if extra is not None else ())
        sources = [s for s in sources if s.repo in wanted]
    real, per_source = cached_extract(out, sources, extra)
    if len(real) > records:
        # More real records than asked for: a seeded sample, in extraction order.
        keep = set(random.Random(seed).sample(range(len(real)), records))
        real = [r for i, r in enumerate(real) if i in keep]
    variants = list(make_variants(real, records - len(real), seed))
    everything = real + variants
    check_all(everything)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with (tmp / "records.jsonl").open("w", encoding="utf-8") as fh:
        for record in everything:
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    write_tree(tmp / "tree", everything, DATASET_VERSION)
    info = {
        **key,
        "records": len(everything),
        "real": len(real),
        "variants": len(variants),
        "realBySource": per_source,
        "repos": len({r["repo"] for r in everything}),
        "datasetVersion": DATASET_VERSION,
        "buildSeconds": round(time.monotonic() - started, 1),
        # Extraction and patterns come from errkb: say which one built the corpus.
        "builtWith": _head(),
    }
    (tmp / "info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    # Replace atomically enough: an interrupted build leaves only the .tmp directory behind.
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return Corpus(directory, info)


def _head() -> str:
    """The git commit of the errkb checkout this runs from ("" outside a checkout)."""
    import subprocess

    proc = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--sources", type=Path, default=None, help="also extract the packages installed here"
    )
    args = parser.parse_args(argv)
    size = args.records or (QUICK_RECORDS if args.quick else DEFAULT_RECORDS)
    corpus = build_corpus(
        args.out, records=size, seed=args.seed, quick=args.quick, extra=args.sources
    )
    print(corpus.directory)
    print(json.dumps(corpus.info, indent=2))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
