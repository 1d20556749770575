"""The benchmark (bench/): corpus variants, log generation with ground truth, scoring, quick run.

The unit tests build a few hundred records from one standard-library package, so they run in
seconds; ``test_quick_run`` runs ``python -m bench.run --quick`` end to end in a temporary
directory (corpus, log, sync, scans, latency, cold start, memory, accuracy) and checks that every
figure is there and precision and recall were computed — not that they meet their targets.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from bench import corpus as bc
from bench import logs as bl
from bench import run as br
from errkb.maint.extract import extract
from errkb.records import check_record, upstream
from errkb.records.slots import SlotKind
from errkb.records.template import parse_template

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_records() -> list[dict[str, Any]]:
    """Real records of a few stdlib packages plus variants: a corpus in miniature."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    real: list[dict[str, Any]] = []
    for pkg in ("json", "email", "http", "urllib"):
        real += extract([stdlib / pkg], repo="python/cpython", root=stdlib, sha="1" * 40)
    return real + list(bc.make_variants(real, 300, seed=3))


def test_change_one_word_keeps_placeholders() -> None:
    rng = random.Random(1)
    message = "Expected {name!r} to have %d items, got {len(x)}"
    for _ in range(50):
        new = bc.change_one_word(message, rng, ["alpha", "bravo", "charlie"])
        if new is None:
            continue
        before, after = parse_template(message), parse_template(new)
        assert [p.raw for p in after.placeholders] == [p.raw for p in before.placeholders]
        assert after.literals != before.literals


def test_variants_are_valid_distinct_and_deterministic(small_records: list[dict[str, Any]]) -> None:
    variants = [r for r in small_records if "bench-variant" in r["tags"]]
    assert len(variants) == 300
    again = list(bc.make_variants([r for r in small_records if r not in variants], 300, seed=3))
    assert [v["id"] for v in again] == [v["id"] for v in variants]
    assert len({r["id"] for r in small_records}) == len(small_records)
    assert len({v["errorMessage"] for v in variants}) == 300
    for v in variants:
        checked = check_record(v, source="test")
        assert checked.ok and not checked.warnings, checked
        assert v["messagePattern"] == upstream.message_pattern(v["errorMessage"])


def test_published_tree_is_consistent(tmp_path: Path, small_records: list[dict[str, Any]]) -> None:
    import gzip
    import hashlib

    bc.write_tree(tmp_path, small_records, bc.DATASET_VERSION)
    data = tmp_path / "data"
    manifest = json.loads((data / "manifest.json").read_text())
    index_gz = (data / "index.json.gz").read_bytes()
    assert manifest["files"]["index"]["sha256"] == hashlib.sha256(index_gz).hexdigest()
    index = json.loads(gzip.decompress(index_gz))
    assert {row["id"] for row in index["errors"]} == {r["id"] for r in small_records}
    repos = json.loads((data / "repos.json").read_text())
    for entry in repos:
        items = json.loads((data / "repos" / f"{entry['repo']}.json").read_text())
        assert entry["errorCount"] == len(items)
        assert {i["analyzedSha"] for i in items} == {entry["analyzedSha"]}


def test_render_values_avoid_literal_text() -> None:
    template = parse_template("Layer {name!r} has shape {tuple(w.shape)} but needs %d dims")
    rendered = bl.render(template, random.Random(5))
    assert rendered is not None
    assert rendered.message.startswith("Layer '")
    assert rendered.captures["tuple(w.shape)"].startswith("(")
    assert rendered.captures["arg1"].isdigit()
    for value in rendered.captures.values():
        assert not any(lit in value for lit in template.literals if lit)


@pytest.mark.parametrize(
    "template",
    [
        "Must provide equal length {len(window_shape)} window_shape and {len(axis)} axes",
        "No layer starts with {prefix!r}: {list(hlg.layers)}",
        "Got dtype {w.dtype} for {type(w).__name__}, scale {x:.3f} of {sorted(keys)}",
        # One value printed plainly, then as a repr: quoted only the second time.
        "Key '{name}.type' (or 'copyable') is required for hook {name!r}",
        "Explode a function with {nout} outputs, a list of {nout} items, not {len(meta)}.",
    ],
)
def test_a_rendering_prints_each_slot_as_its_code_would(template: str) -> None:
    # By name alone "len(window_shape)" got a shape and "list(hlg.layers)" a word, which the
    # record's typed slots refuse: the run then counted errkb's right refusal as a miss.
    record = {
        "id": "r" * 16,
        "errorMessage": template,
        "messagePattern": upstream.message_pattern(template),
    }
    oracle = bl.Oracle([record])
    assert oracle.kinds[record["id"]]  # typed slots, one per placeholder
    rng = random.Random(4)
    for _ in range(40):
        rendered = bl.render(parse_template(template), rng, oracle.kinds[record["id"]])
        assert rendered is not None
        assert oracle.search(rendered.message) == {record["id"]}, rendered.message
    bland = bl.render(parse_template(template), None, oracle.kinds[record["id"]])
    assert bland is not None and oracle.search(bland.message) == {record["id"]}


def test_generated_log_truth_points_at_the_messages(
    tmp_path: Path, small_records: list[dict[str, Any]]
) -> None:
    path = tmp_path / "x.log"
    log = bl.generate_log(small_records, path, size_mb=0.3, seed=9, rate=300)
    lines = path.read_bytes().decode("utf-8").split("\n")
    truth = log.truth()
    assert log.meta["instances"] > 30 and log.meta["truthRows"] == len(truth)
    by_id = {r["id"]: r for r in small_records}
    for row in truth:
        template = parse_template(by_id[row["id"]]["errorMessage"])
        # The anchor of the planted record is on the reported line (JSON replies escape it).
        anchor = max(template.literals, key=len).strip()
        line = lines[row["line"] - 1]
        assert anchor in line or json.dumps(anchor)[1:-1] in line, (row, line)
    # Same seed, same bytes; cached on the second call.
    first = path.read_bytes()
    again = bl.generate_log(small_records, tmp_path / "y.log", size_mb=0.3, seed=9, rate=300)
    assert again.path.read_bytes() == first


def test_score_counts_and_explains() -> None:
    truth = [
        {"id": "a", "line": 3, "captures": {"x": "1"}, "instance": 0, "shape": "plain",
         "overlaps": ["c"]},
        {"id": "b", "line": 9, "captures": {}, "instance": 1, "shape": "sglang", "overlaps": []},
        {"id": "b", "line": 15, "captures": {}, "instance": 1, "shape": "sglang", "overlaps": []},
    ]  # fmt: skip
    predictions = [
        {"id": "a", "lines": [3], "captures": {"x": "2"}},
        {"id": "c", "lines": [3], "captures": {}},
        {"id": "b", "lines": [9], "captures": {}},
        {"id": "d", "lines": [20], "captures": {}},
    ]
    acc = br.score(predictions, truth, ["line"] * 30, {"a": 20, "c": 8})
    assert (acc.tp, acc.fp, acc.fn) == (2, 2, 1)
    assert acc.capture_accuracy == 0.5
    causes = sorted(h["cause"].split(":")[0] for h in acc.false_hits)
    assert causes == ["filler line (no error planted here)", "overlap"]
    assert acc.misses[0]["cause"].startswith("found at line(s) [9]")
    # The planted copy at line 15 reported as a possible match (a generic record without its
    # class and frame) is counted apart: neither found nor missed.
    maybe = br.score(predictions, truth, ["line"] * 30, {}, possible=[{"id": "b", "lines": [15]}])
    assert (maybe.tp, maybe.fn, maybe.possible) == (2, 0, 1)


def test_naive_baseline_extrapolates() -> None:
    records = [{"messagePattern": "bad value (.+?) here"}, {"messagePattern": "([unclosed"}]
    text = "\n".join(f"line {i} bad value {i} here" for i in range(50))
    result = br.naive_baseline(records, text, lines=20, patterns=2, seed=1)
    assert result["patterns_not_compiling"] == 1
    assert result["estimated_seconds"] > 0 and result["log_lines"] == 50


@pytest.mark.slow
def test_quick_run(tmp_path: Path) -> None:
    results_path = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--out", str(tmp_path / "out"),
         "--json", str(results_path), "--cold-runs", "2", "--no-accuracy"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(results_path.read_text())
    names = [f["name"] for f in results["figures"]]
    for prefix in (
        "scan: kb.explain", "scan: errkb explain", "baseline: LC_ALL=C grep",
        "baseline: ahocorasick_rs", "baseline: naive", "scan: kb.explain, 3.0 MB sparse",
        "scan: kb.explain, 1.2 MB keywordless", "scan: time per MB", "memory: process RSS",
        "accuracy, sparse log", "accuracy, keywordless log", "latency p50", "latency p99",
        "cold: errkb explain < example, bundled", "cold: errkb explain < example, 4000",
        "sync: full sync", "sync: unchanged", "memory: warm matcher", "precision", "recall",
        "capture accuracy",
    ):  # fmt: skip
        assert any(n.startswith(prefix) for n in names), prefix
    for figure in results["figures"]:
        assert figure["status"] in ("PASS", "MISS", "")
    acc = results["accuracy"]
    # A planted generic record printed without its class and frame is found as possible.
    assert acc["tp"] + acc["fn"] + acc["possible"] == results["log"]["truthRows"] > 0
    assert 0 <= acc["precision"] <= 1 and 0 <= acc["recall"] <= 1
    assert len(acc["misses"]) == acc["fn"] and len(acc["false_hits"]) == acc["fp"]
    assert results["corpus"]["real"] + results["corpus"]["variants"] == 4000
    assert "| Figure" in proc.stdout and "recall" in proc.stdout


@pytest.mark.slow
def test_cold_start_figure_against_a_revision(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cold", "--rev", "HEAD", "--runs", "1"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[1:]] == [
        "| import click",
        "| errkb explain <example>, working tree",
        "| errkb explain <example>, commit HEAD",
    ]
    for row in rows[1:]:
        wall, cpu = float(row.split(" | ")[1].split()[0]), float(row.split(" | ")[3].split()[0])
        assert wall > 0 and cpu > 0
    verdicts = [line for line in proc.stdout.splitlines() if line.startswith(("PASS", "MISS"))]
    assert len(verdicts) == 2 and "x import click" in verdicts[0] and "commit HEAD" in verdicts[1]


@pytest.mark.slow
def test_cold_start_figure_against_a_given_knowledge_base(tmp_path: Path) -> None:
    db = tmp_path / "given.sqlite3"  # not there yet: the first (unmeasured) open makes it
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cold", "--runs", "1", "--db", str(db)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert db.is_file()  # the working tree explained against it, not against one of its own
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[1:]] == [
        "| import click",
        "| errkb explain <example>, working tree",
    ]


@pytest.mark.parametrize(
    ("template", "kinds", "quoted"),
    [
        ("Layer {name!r} failed", (), False),  # a !r group is unquoted by errkb
        ("currently {repr(default) if default is not None else 'not set'} here", (), True),
        ("a forwardref={validator_type} validator here", (SlotKind.REPR,), True),
        ("value {name} then {name!r} again", (), False),  # the first occurrence is plain
    ],
)
def test_the_truth_holds_what_errkb_captures_where_the_value_prints(
    template: str, kinds: tuple[SlotKind, ...], quoted: bool
) -> None:
    # A repr printed in a plain slot is the slot's value, quotes and all: the 500k run
    # counted errkb's right capture "'alpha'" as wrong against a truth of "alpha".
    parsed = parse_template(template)
    name = parsed.placeholders[0].name
    for seed in range(20):
        rendered = bl.render(parsed, random.Random(seed), kinds)
        assert rendered is not None
        value = rendered.captures[name]
        if value.isalpha() or "'" in value:
            assert (value[:1] == "'") is quoted, (template, value)
            assert value in rendered.message


def test_a_measured_command_s_process_tree_is_summed() -> None:
    # A parent that holds little and a child that holds 80 MiB: the sampled tree counts the
    # child (the parent alone is ~10 MiB), and never less than the one process GNU time saw.
    child = (
        "b = bytearray(80 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(1.5)"
    )
    run_ = br.run_measured(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])",
        ]
    )
    assert run_.returncode == 0
    assert run_.tree_rss >= 80 * 2**20
    if run_.max_rss >= 0:
        assert run_.tree_rss >= run_.max_rss - 16 * 2**20  # sampled: the tail may be missed


def test_sync_floor_times_each_piece_of_a_synced_tree(
    tmp_path: Path, small_records: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    import errkb
    from bench import sync_floor
    from tests.conftest import require_extra

    require_extra("hyperscan", "fast")  # the anchors' piece is Hyperscan's compile
    tree = tmp_path / "tree"
    bc.write_tree(tree, small_records, bc.DATASET_VERSION)
    db = tmp_path / "kb.sqlite3"
    with errkb.open(db, bundled=False) as kb:
        kb.sync(tree)
    per, timed = sync_floor.check_cost(tree, files=3, rounds=1)
    assert per > 0 and 0 < timed <= len(small_records)
    seconds, literals = sync_floor.anchors_cost(db)
    assert seconds >= 0 and literals >= len(small_records) // 2
    labels = [label for label, _seconds in sync_floor.sqlite_cost(db)]  # every row copied
    assert labels[0] == "records" and "full-text fill" in labels
    assert any(label.startswith("index ") for label in labels)
    sync_floor.main([str(db), str(tree), "--files", "2", "--rounds", "1"])
    assert "of wall time on two cores" in capsys.readouterr().out


def _synced(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    """A knowledge base synced from ``records`` published as a tree (no bundled records)."""
    import errkb

    db = tmp_path / "kb.sqlite3"
    tree = tmp_path / "tree"
    bc.write_tree(tree, records, bc.DATASET_VERSION)
    with errkb.open(db, bundled=False) as kb:
        kb.sync(tree)
    return db


def test_scan_floor_times_the_native_pieces_of_a_large_explain(
    tmp_path: Path, small_records: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    import errkb
    from bench import scan_floor
    from errkb.match import anchordb
    from tests.conftest import require_extra

    require_extra("hyperscan", "fast")  # the passes and the one-part compile are Hyperscan's
    db = _synced(tmp_path, small_records)
    log = bl.generate_log(small_records, tmp_path / "x.log", size_mb=0.4, seed=9, rate=300)
    with errkb.open(db, bundled=False) as kb:
        matched = {m.id for m in kb.explain(log.path.read_bytes(), limits=None).exact}
    assert matched  # the log plants known messages
    figures = scan_floor.floor_of(str(db), log.path, rounds=1)
    assert figures["matched_records"] == len(matched)
    assert figures["bytes"] == log.path.stat().st_size
    assert all(float(figures[k]) >= 0 for k in ("anchors", "shapes", "newlines", "re2", "rows"))
    # The one-part database holds every plain literal of the record anchors, and the
    # module's part size is left as it was.
    chunk = anchordb.CHUNK_WORDS
    literals = tmp_path / "plain.txt"
    count = scan_floor.plain_literals(str(db), literals)
    got = scan_floor.one_part(literals, [log.path])
    assert got["literals"] == count > len(matched) // 2
    assert chunk == anchordb.CHUNK_WORDS  # restored
    assert set(got["scans"]) == {log.path.name}  # type: ignore[call-overload]
    scan_floor.main([str(db), str(log.path), "--rounds", "1"])
    out = capsys.readouterr().out
    assert f"{len(matched)} records matched" in out and "native floor" in out


def test_the_scan_child_scores_the_whole_report_when_the_default_one_is_cut(
    tmp_path: Path, small_records: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The figures time the default call, whose report is bounded; accuracy is judged on the
    # whole report (a log planting more records than the report lists is not a recall miss).
    import functools

    import errkb
    from errkb.match import recordscan

    db = _synced(tmp_path, small_records)
    log = bl.generate_log(small_records, tmp_path / "x.log", size_mb=1.5, seed=9, rate=300)
    monkeypatch.setattr(recordscan, "Limits", functools.partial(recordscan.Limits, matches=5))
    result = tmp_path / "scan.json"
    example = REPO_ROOT / "data" / "examples" / "quanto-incompatible-scale.log"
    br.child_scan(str(db), str(log.path), str(example), str(result))
    out = json.loads(result.read_text(encoding="utf-8"))
    with errkb.open(db, bundled=False) as kb:
        whole = kb.explain(log.path.read_bytes(), limits=None)
    assert len(whole.exact) > 5
    # Exact and possible matches are each kept within the limit (possible ones never take an
    # answer's place); both are counted when cut.
    possible = [m for m in whole.matches if m.confidence.value == "possible"]
    assert out["cut_matches"] == len(whole.exact) - 5 + max(len(possible) - 5, 0)
    assert sorted(m["id"] for m in out["matches"]) == sorted(m.id for m in whole.exact)


# ---------------------------------------------------------------------------- bench.accuracy
def _traceback_text(plant: Any) -> str:
    """What Python prints when the plant's generated module raises (a real traceback)."""
    import importlib.util
    import traceback

    spec = importlib.util.spec_from_file_location(f"_test_plant_{plant.key}", plant.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        getattr(module, plant.func)()
    except Exception as exc:
        return "".join(traceback.format_exception(exc))
    raise AssertionError(f"{plant.key} did not raise")


def test_accuracy_scores_planted_records_and_lists_wrong_exact_answers(
    tmp_path: Path, kb: Any, envelopes: list[dict[str, Any]]
) -> None:
    from bench import accuracy as ba
    from bench import toollogs as tl

    records = [e["record"] for e in envelopes]
    oracle = bl.Oracle(records)
    rng = random.Random(3)
    planter = bl.Planter(records, oracle, rng, bl.Clock(rng))

    def rendered(record: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
        got = planter.render_clean(record)
        return None if got is None else (got.message, got.captures)

    # The merged-column record: its slots take what bench.logs renders (the Quanto seed's
    # ``{scale_slice.get_dtype()}`` gets ``int8``, which its synced pattern refuses).
    must = [r for r in planter.plantable if "merged-column" in r["errorMessage"]]
    plants = tl.make_plants(
        tmp_path / "plants", rng, planter.plantable, rendered,
        n_records=1, n_siblings=0, n_interpreter=2, must=must,
    )  # fmt: skip
    kinds = [p.kind for p in plants]
    assert kinds.count(tl.PlantKind.RECORD) == 1 and kinds.count(tl.PlantKind.INTERPRETER) == 2
    record_plant = next(p for p in plants if p.kind is tl.PlantKind.RECORD)
    # The raising module's path ends with the record's filePath, the class is the record's.
    by_id = {r["id"]: r for r in records}
    assert record_plant.path.endswith(by_id[str(record_plant.record)]["filePath"])
    assert record_plant.printed.startswith(by_id[str(record_plant.record)]["errorClass"] + ": ")
    text = "INFO starting\n" + "".join(_traceback_text(p) for p in plants) + "INFO done\n"
    other = "srun: error: node-07: tasks 0-3: Exited with exit code 1\n"
    logs: list[tuple[Path, dict[str, Any]]] = []
    for name, body, mine in (("a.log", text, plants), ("b.log", other, [])):
        (tmp_path / name).write_text(body, encoding="utf-8")
        rows = [{**tl._plant_row(p), "lines": tl.plant_lines(body, p)} for p in mine]
        logs.append((tmp_path / name, {"tool": "test", "plants": rows}))
    explained: dict[str, list[dict[str, Any]]] = {str(path): [] for path, _ in logs}
    for path, _ in logs:
        for m in kb.explain(path.read_bytes()).to_dict()["matches"]:
            explained[str(path)].append(
                {k: m.get(k) for k in ("id", "confidence", "lines", "captures", "evidence")}
            )
    scored = ba.score(logs, explained, None, {})
    assert (scored["planted"], scored["found"], scored["capturesRight"]) == (1, 1, 1)
    assert scored["wrongCount"] == 0 and scored["precision"] == 1.0
    # A hand-made wrong answer: the record "exact" on an interpreter error's line, and on the
    # other log's slurm line nobody planted.
    interp = next(r for r in logs[0][1]["plants"] if r["kind"] == "interpreter")
    explained[str(logs[0][0])].append(
        {"id": "f" * 16, "confidence": "exact", "lines": interp["lines"][:1], "captures": {},
         "evidence": ["made up"], "decision": {"generic": True, "classAgrees": False}}
    )  # fmt: skip
    explained[str(logs[1][0])].append(
        {"id": "e" * 16, "confidence": "exact", "lines": [1], "captures": {}, "evidence": []}
    )
    # And the planted record once more as a ``possible`` suggestion (the lead's new confidence):
    # counted apart, neither right nor wrong.
    explained[str(logs[0][0])].append(
        {"id": record_plant.record, "confidence": "possible",
         "lines": tl.plant_lines(text, record_plant), "captures": {}, "evidence": []}
    )  # fmt: skip
    scored = ba.score(logs, explained, None, {})
    assert (scored["possible"], scored["possibleAtPlantedRecord"]) == (1, 1)
    assert scored["wrongCount"] == 2 and scored["wrongSource"] == 1
    assert scored["genericExactWithoutClassAndFrame"] == 1
    assert scored["wrongByCause"] == {
        "interpreter error (wrong source)": 1,
        "unplanted test text": 1,
    }
    wrong = {w["id"]: w for w in scored["wrong"]}
    assert wrong["e" * 16]["text"] == other.strip() and wrong["e" * 16]["line"] == 1
    assert scored["precision"] == 1 / 3
    table = ba.table({"3 records": scored})
    assert "| precision of exact | 33.3% (1/3) |" in table


def test_plant_lines_read_a_message_as_each_tool_prints_it() -> None:
    from bench import toollogs as tl

    plant = tl.Plant(
        "r0", tl.PlantKind.RECORD, "ValueError: Layer 'a' has \"b\" <c>",
        "Layer 'a' has \"b\" <c>", "/x.py", "f",
    )  # fmt: skip
    text = "\n".join(
        [
            "ValueError: Layer 'a' has \"b\" <c>",
            "<pre>Layer &#x27;a&#x27; has &quot;b&quot; &lt;c&gt;</pre>",
            'write(2, "ValueError: Layer \'a\' has \\"b\\" <c>\\n", 40) = 40',
            "Layer 'a' has",
        ]
    )
    assert tl.plant_lines(text, plant) == [1, 2, 3]
    # A short message is source text too: its line must name the class.
    short = tl.Plant("i0", tl.PlantKind.INTERPRETER, "KeyError: 'model'", "'model'", "/y.py", "g")
    assert tl.plant_lines("    return cfg['model']\nKeyError: 'model'", short) == [2]


def test_extra_sources_join_the_corpus_and_replace_installed_packages(tmp_path: Path) -> None:
    (tmp_path / "click").mkdir()
    (tmp_path / "onefile.py").write_text("", encoding="utf-8")
    (tmp_path / "bin").mkdir()
    (tmp_path / "click-9.0.dist-info").mkdir()
    sources = bc.default_sources(tmp_path)
    by_repo = {s.repo: s.path for s in sources}
    assert by_repo["pypi/click"] == tmp_path / "click"  # not the one installed beside errkb
    assert by_repo["pypi/onefile"] == tmp_path / "onefile.py"
    assert "pypi/bin" not in by_repo and "pypi/errkb" not in by_repo
    assert sources[0].repo == "python/cpython"
    before = bc.sources_fingerprint(tmp_path)
    (tmp_path / "torch-2.13.0.dist-info").mkdir()
    assert bc.sources_fingerprint(tmp_path) != before


def test_a_pytest_short_summary_of_a_planted_traceback_is_its_copy() -> None:
    from bench.accuracy import _summary_copy

    plant = {
        "kind": "record",
        "record": "a" * 16,
        "captures": {"s": "(2,)"},
        "printed": "ValueError: Expected scalar scale for fused-in-checkpoint merged-column",
    }
    line = "FAILED test_pipeline.py::test_case_r2 - ValueError: Expected scalar scale for..."
    assert _summary_copy(line, {"id": "a" * 16, "captures": {"s": "(2,)"}}, [plant])
    # Another record, other captures or a line that is no summary are not its copy.
    assert not _summary_copy(line, {"id": "b" * 16, "captures": {"s": "(2,)"}}, [plant])
    assert not _summary_copy(line, {"id": "a" * 16, "captures": {"s": "(3,)"}}, [plant])
    assert not _summary_copy("ValueError: Expected scalar", {"id": "a" * 16}, [plant])
