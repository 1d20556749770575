"""Cold ``errkb explain`` imports only what explaining needs (ARCHITECTURE.md's rule).

A one-shot ``errkb explain < example`` is mostly import time (a frozen dataclass costs about half
a millisecond to create, a Python regex about as much to compile), so every family that explain
does not use stays out: the ORM and the migrations, the checkpoint readers, the other commands'
report values and renderers, and what only an error path needs. The process is real (``python
-m errkb`` on a knowledge base built beforehand) and its imports are ``sys.modules`` at exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import errkb
from tests.conftest import EXAMPLES

#: Module (or package) names cold explain must not import, each with the reason.
NOT_ON_EXPLAIN = {
    "sqlalchemy": "the ORM: only writes and migrations use it",
    "alembic": "migrations: the knowledge base was built beforehand",
    "psycopg": "the PostgreSQL driver: this is an SQLite file",
    "errkb.store.postgres": "the PostgreSQL backend",
    "errkb.store.models": "the ORM models",
    "errkb.store.values": "the values of writes, history and inventory",
    "errkb.checkpoint": "the checkpoint readers: only errkb check reads checkpoints",
    "errkb.validators.preflight": "errkb check's runner",
    "errkb.report.records": "list / stats values",
    "errkb.report.diagnostics": "stderr notes beside a report: explain writes none",
    "errkb.report.ingest": "ingest's values",
    "errkb.report.check": "check's values",
    "errkb.report.lint": "lint's values",
    "errkb.report.sync": "the sync family's values",
    "errkb.render.tables": "list / stats / ingest / lint renderers",
    "errkb.render.sync": "sync renderers",
    "errkb.render.check": "check renderers",
    "errkb.render.search": "search renderers",
    "errkb.cli.inventory": "the list / stats commands",
    "errkb.ingest": "ingesting",
    "errkb.sync": "syncing",
    "errkb.search": "search",
    "errkb.maint": "maintainers' tools",
    "errkb.serve": "the bot-facing service",
    "jsonschema": "full schema validation: only writes validate",
    "logging": "only a record RE2 refuses logs",
    "traceback": "only --debug prints one",
    "errkb.parse.containers": "the container decoder: plain text needs only errkb.parse.sniff",
    "html": "its entity table: only text holding an entity is unescaped",
    "hashlib": "OpenSSL: only a large input builds or reads the anchor table",
    "base64": "only errkb check decodes a Quanto quantization map",
    "bisect": "only a container's values are told apart by it",
    "errkb.match.scan": "the anchor table: only a large input loads it",
    "errkb.match.anchordb": "the anchor pass's automaton: only a large input runs it",
    "gzip": "only a compressed input is decompressed (told by its first bytes)",
    "bz2": "only a compressed input is decompressed",
    "lzma": "only a compressed input is decompressed",
}


#: The end of a probe: the command line run as ``python -m errkb`` runs it, and at exit what
#: the probe's function ``what`` returns written to the file named by the first argument.
_RUN_WRITING_AT_EXIT = """
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write({what}()))
sys.argv[0] = "errkb"
runpy.run_module("errkb", run_name="__main__", alter_sys=True)
"""

#: Runs the command line as ``python -m errkb`` does, then lists ``sys.modules`` at exit (not
#: ``-X importtime``, which misses modules loaded by ``importlib.import_module``), and as
#: ``pattern:MODULE.NAME`` each regex made by ``errkb._lazy.pattern`` that was compiled.
PROBE = """
import atexit, runpy, sys

def listing():
    names = sorted(sys.modules)
    for mod in [m for m in names if m.startswith("errkb")]:
        for name, value in sorted(vars(sys.modules[mod]).items()):
            wrapped = getattr(value, "__wrapped__", None)
            if getattr(wrapped, "__qualname__", "") == "pattern.<locals>.compiled":
                if value.cache_info().currsize:
                    names.append(f"pattern:{mod}.{name}")
    return "\\n".join(names)
""" + _RUN_WRITING_AT_EXIT.format(what="listing")


def _imported(argv: list[str], tmp_path: Path, code: int = 0) -> tuple[str, set[str]]:
    """Standard output of ``errkb ARGV`` (exiting ``code``) and every module it imported."""
    listing = tmp_path / "modules.txt"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(listing), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == code, proc.stderr[-2000:]
    return proc.stdout, set(listing.read_text().split())


def _offending(modules: set[str]) -> dict[str, str]:
    return {
        name: why
        for name, why in NOT_ON_EXPLAIN.items()
        if any(m == name or m.startswith(name + ".") for m in modules)
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cold") / "kb.sqlite3"
    errkb.open(db).close()  # the bundled records, ingested once, before the cold run
    return db


def test_cold_explain_imports_only_what_explaining_needs(built: Path, tmp_path: Path) -> None:
    example = EXAMPLES / "quanto-incompatible-scale.log"
    out, modules = _imported(["--db", str(built), "explain", str(example)], tmp_path)
    assert "5c84e15f4be2c1a6" in out  # it did explain (the quanto record, with its validator)
    assert {"errkb.kb", "errkb.cli.records", "errkb.validators.quanto"} <= modules  # it sees them
    assert _offending(modules) == {}
    # The patterns only other inputs need (IPython, exception groups, fences, bytes, entities)
    # are compiled on first use, and a plain log is not that use.
    assert {m for m in modules if m.startswith("pattern:")} == set()


def test_cold_explain_of_an_unknown_error_stays_as_lean(built: Path, tmp_path: Path) -> None:
    # Nothing known: the message-first pass reads the lines too, and still imports no decoder.
    log = tmp_path / "unknown.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "app.py", line 3, in <module>\n'
        "ValueError: the flux capacitor is not charged\n",
        encoding="utf-8",
    )
    out, modules = _imported(["--db", str(built), "explain", str(log)], tmp_path, code=1)
    assert "flux capacitor" in out and "errkb.match.msgfirst" in modules
    assert _offending(modules) == {}
    assert {m for m in modules if m.startswith("pattern:")} == set()


def test_the_probe_sees_the_container_decoder_and_its_patterns(built: Path, tmp_path: Path) -> None:
    # docker's json-file lines: the decoder is imported and compiles its patterns when needed.
    text = (EXAMPLES / "quanto-incompatible-scale.log").read_text(encoding="utf-8")
    log = tmp_path / "docker.log"
    log.write_text(
        "".join(
            json.dumps({"log": line, "stream": "stderr"}) + "\n" for line in text.splitlines(True)
        ),
        encoding="utf-8",
    )
    out, modules = _imported(["--db", str(built), "explain", str(log)], tmp_path)
    assert "5c84e15f4be2c1a6" in out
    assert "errkb.parse.containers" in set(_offending(modules))
    assert "pattern:errkb.parse.containers._doc_line_re" in modules


def test_the_probe_sees_what_another_command_imports(built: Path, tmp_path: Path) -> None:
    # stats is not explain: it imports its own values and renderers, and the probe says so.
    out, modules = _imported(["--db", str(built), "stats"], tmp_path)
    assert "records" in out
    assert {"errkb.report.records", "errkb.render.tables", "errkb.cli.inventory"} <= set(
        _offending(modules)
    )


def test_every_report_name_resolves_lazily_to_its_definition() -> None:
    import importlib

    import errkb.report as report

    for name in report.__all__:
        assert getattr(report, name) is not None, name
    for name, (module, attr) in report._LAZY.items():
        assert getattr(importlib.import_module(module), attr) is getattr(report, name), name
    with pytest.raises(AttributeError, match=r"errkb\.report' has no attribute 'Nope'"):
        report.Nope  # noqa: B018 - the look-up is the test


def test_every_store_value_resolves_lazily_to_its_definition() -> None:
    import importlib

    import errkb.store as store
    import errkb.store.interface as interface
    import errkb.store.values as values

    for package in (store, interface):
        for name, (module, attr) in package._LAZY.items():
            assert module == values.__name__ and attr in values.__all__, name
            assert getattr(package, name) is getattr(importlib.import_module(module), attr), name
        with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
            package.Nope  # noqa: B018 - the look-up is the test
    assert set(interface._LAZY) == set(values.__all__)
    # The package re-exports every value (not the row helpers), as it did before they moved.
    assert set(store._LAZY) == {n for n in values.__all__ if not n.endswith("_from")}


def test_the_collector_is_tuned_only_in_the_commands_own_process(built: Path) -> None:
    # errkb's main() on the process's own command line owns the process: what it imports and
    # opens is frozen (gc.freeze), so later collections skip it. A host running the click group
    # (a test's CliRunner, a service) or main(argv) keeps its collector exactly as it was.
    import gc

    from errkb.cli import main
    from tests.cli import QUANTO_LOG, run

    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    assert run(built, "explain", str(QUANTO_LOG)).exit_code == 0
    with pytest.raises(SystemExit) as done:
        main(["--db", str(built), "explain", str(QUANTO_LOG)])
    assert done.value.code == 0
    assert (gc.get_freeze_count(), gc.isenabled()) == (frozen, enabled)

    probe = (
        "import atexit, gc, runpy, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), gc.isenabled()))\n"
        "sys.argv[0] = 'errkb'\n"
        "runpy.run_module('errkb', run_name='__main__', alter_sys=True)\n"
    )
    words = _probed(probe, built, QUANTO_LOG).split()
    at = words.index("frozen")
    assert int(words[at + 1]) > 1000 and words[at + 2] == "True"  # frozen, collector back on


def test_no_collection_runs_while_the_command_line_imports(built: Path) -> None:
    # What importing the command line makes lives until exit, so the collector is held off
    # until errkb.cli is imported (a collection then would free nothing), and on again after.
    probe = (
        "import atexit, gc, sys\n"
        "during = []\n"
        "def seen(phase, info):\n"
        "    cli = sys.modules.get('errkb.cli')\n"  # __all__ is its last statement
        "    if phase == 'start' and cli is not None and not hasattr(cli, '__all__'):\n"
        "        during.append(info['generation'])\n"
        "gc.callbacks.append(seen)\n"
        "atexit.register(lambda: print('during', len(during), gc.isenabled()))\n"
        "sys.argv[0] = 'errkb'\n"
        "from errkb._entry import main\n"
        "main()\n"
    )
    example = EXAMPLES / "quanto-incompatible-scale.log"
    assert _probed(probe, built, example).split()[-3:] == ["during", "0", "True"]


def _probed(probe: str, built: Path, log: Path) -> str:
    """What ``probe`` printed, run as ``errkb --db built explain log`` in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-c", probe, "--db", str(built), "explain", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


#: What a cold explain of one known traceback makes at import, in errkb's own modules, at most:
#: each frozen dataclass costs about half a millisecond to define and each Python regex about as
#: much to compile, so a new one on this path is a choice to make, not an accident (raise a
#: budget with the reason; BENCHMARKS.md "Stop 46" has the measured cost).
DATACLASS_BUDGET = 36
REGEX_BUDGET = 24

#: Lists, at exit, each dataclass and compiled regex errkb's loaded modules define at module
#: level, and what the shared prefix table built (``prefixes.ByFirst``).
MADE_PROBE = """
import atexit, dataclasses, re, runpy, sys

def made():
    out = []
    for mod in sorted(m for m in sys.modules if m.startswith("errkb")):
        for name, value in vars(sys.modules[mod]).items():
            if isinstance(value, type) and value.__module__ == mod:
                if dataclasses.is_dataclass(value):
                    out.append(f"dataclass:{mod}.{name}")
            elif isinstance(value, re.Pattern):
                out.append(f"regex:{mod}.{name}")
    table = sys.modules["errkb.parse.prefixes"].by_first()
    out.append(f"subsets:{len(table._subsets)}:{table._firsts is not None}")
    return "\\n".join(out)
""" + _RUN_WRITING_AT_EXIT.format(what="made")


def test_cold_explain_defines_and_compiles_within_its_budget(built: Path, tmp_path: Path) -> None:
    listing = tmp_path / "made.txt"
    example = EXAMPLES / "quanto-incompatible-scale.log"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            MADE_PROBE,
            str(listing),
            "--db",
            str(built),
            "explain",
            str(example),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    made = listing.read_text().split()
    dataclasses = [m for m in made if m.startswith("dataclass:")]
    regexes = [m for m in made if m.startswith("regex:")]
    # The probe sees them: explain's own values and the prefix table's one alternation.
    assert {"dataclass:errkb.report.Match", "regex:errkb.parse.prefixes._COMPILED"} <= set(made)
    assert len(dataclasses) <= DATACLASS_BUDGET, dataclasses
    assert len(regexes) <= REGEX_BUDGET, regexes
    # Values only writes, checks and other commands build are defined elsewhere, on first use.
    elsewhere = {
        "dataclass:errkb.records.record.Record",
        "dataclass:errkb.records.template.Template",
        "dataclass:errkb.store.values.Ending",
    }
    assert not elsewhere & set(made)
    # A paste's few lines are read with the whole alternation: no rule's first characters are
    # parsed and no per-character subset is compiled.
    assert "subsets:0:False" in made
