"""The word tiers of ``errkb.records.specificity``, measured from real records and real logs.

``errkb.records.specificity`` weighs each literal word of a template by how much it tells of
the message's source. Two data-derived tiers stand beside its hand-written list of English
function words and error vocabulary:

* common (no weight): words in at least ``--common`` of the real records' templates (the
  records ``errkb extract`` made from the standard library and the installed packages, variants
  left out), or in at least ``--log-share`` of the lines of real CI logs
  (``shared/reallogs/drci/raw``);
* frequent (half weight): words in at least ``--frequent`` of the real records' templates.

``python -m bench.common_words CORPUS_DIR [--logs DIR]`` prints both lists, sorted, ready to
paste into ``errkb/records/specificity.py`` (``_DATA_COMMON`` and ``_DATA_FREQUENT``); the
figures behind them are printed to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections import Counter
from pathlib import Path

from errkb.records.specificity import COMMON_WORDS
from errkb.records.template import parse_template

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
DEFAULT_LOGS = Path(__file__).resolve().parents[2] / "shared" / "reallogs" / "drci" / "raw"


def record_frequencies(records: Path) -> tuple[int, Counter[str]]:
    """How many real records there are, and in how many templates each word is."""
    df: Counter[str] = Counter()
    n = 0
    with records.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if "bench-variant" in record.get("tags", ()):
                continue
            n += 1
            template = parse_template(record["errorMessage"])
            df.update({w.lower().strip("'") for t in template.literals for w in _WORD.findall(t)})
    return n, df


def log_frequencies(logs: Path) -> tuple[int, Counter[str]]:
    """How many log lines there are, and on how many each word is."""
    df: Counter[str] = Counter()
    n = 0
    for path in sorted(logs.glob("*")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            n += 1
            df.update({w.lower().strip("'") for w in _WORD.findall(line)})
    return n, df


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a bench.corpus directory (records.jsonl)")
    parser.add_argument("--logs", type=Path, default=DEFAULT_LOGS)
    parser.add_argument("--common", type=float, default=0.01)
    parser.add_argument("--frequent", type=float, default=0.003)
    parser.add_argument("--log-share", type=float, default=0.02)
    args = parser.parse_args(argv)
    n, df = record_frequencies(args.corpus / "records.jsonl")
    lines, in_logs = log_frequencies(args.logs) if args.logs.is_dir() else (0, Counter())
    common = {w for w, c in df.items() if c >= args.common * n}
    # A log's paths and hosts fill its lines with names (``t16``, ``third_party``): only plain
    # words that templates use count as ordinary log text.
    common |= {
        w
        for w, c in in_logs.items()
        if lines and c >= args.log_share * lines and w.isalpha() and len(w) >= 3 and w in df
    }
    frequent = {w for w, c in df.items() if c >= args.frequent * n} - common
    common -= COMMON_WORDS
    frequent -= COMMON_WORDS
    keep = {w for w in common | frequent if len(w) >= 2}
    print(f"{n} real records, {lines} log lines", file=sys.stderr)
    for name, words in (("_DATA_COMMON", common & keep), ("_DATA_FREQUENT", frequent & keep)):
        body = textwrap.fill(" ".join(sorted(words)), 96)
        print(f'{name} = """\n{body}\n"""')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
