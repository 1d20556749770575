r"""Per-line prefix rules: one table of named shapes, each with an example that is also its test.

Loggers and collectors put prefixes in front of every line (timestamps, levels, ranks, pods, pids,
journald's ``host python3[14047]:``). Each shape is one :class:`PrefixRule`: a name, the shape as
a regex, what the prefix tells about the line (its :class:`PrefixKind`), and an example line with
the text that must remain once that rule (and only that rule) stripped it.
``tests/test_prefixes.py`` runs every example, so adding a prefix is adding one row here.

All rules are compiled into ONE alternation (each rule a named group ``K_<name>`` that closes
last, so ``match.lastgroup`` names the rule): stripping a prefix is one regex call per prefix,
not one per rule, which matters on the per-line hot path of dense logs. Rule order matters where
shapes overlap (``[pod/..]`` and ``[rank0]:`` before the generic ``[tag]``; journald before bare
timestamps; cloud severity before level words). Every repetition is bounded and every rule is
anchored at the match position, so no rule can backtrack catastrophically.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from errkb.parse.vocabulary import CLOUD_SEVERITIES, level_alternation

__all__ = ["RULES", "PrefixKind", "PrefixRule", "compiled", "compiled_indented", "rule_for"]


class PrefixKind(enum.StrEnum):
    """What a prefix says about its line."""

    TRANSPORT = "transport"  #: names the writer (group ``who``): pod, rank, pid, unit
    STAMP = "stamp"  #: a timestamp (group ``stamp``); a space-separated date starts a record
    RECORD = "record"  #: a logger record header with timestamp and level (group ``level``)
    LEVEL = "level"  #: a level word (group ``level``; ``pad``: uvicorn's padding)
    TAG = "tag"  #: a bracketed tag (group ``tag``); a rank-like tag names the stream
    PYTEST = "pytest"  #: pytest's ``E   `` exception-line gutter
    NOISE = "noise"  #: carries nothing (code locations, cloud severities): just dropped


@dataclass(frozen=True)
class PrefixRule:
    """One prefix shape."""

    name: str  #: identifier-like, unique (also the regex group ``K_<name>``)
    kind: PrefixKind
    shape: str  #: the regex, with the kind's named groups (namespaced when compiled)
    example: str  #: a line that carries this prefix
    remainder: str  #: what is left of ``example`` once this one prefix is stripped
    #: The shape may begin with whitespace. Most prefixes never do (an indented line is a
    #: frame, source or a continuation line, whose text is left as it is); a rule that does is
    #: also tried on indented lines.
    indented: bool = False


_DATE = r"(?:\d{4}[-/])?\d{1,2}[-/]\d{1,2}"
_TIME = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,9})?"
_TZ = r"(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?"
_STAMP = rf"{_DATE}[ T]{_TIME}{_TZ}"
_LEVELS = level_alternation()
_MONTHS = r"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_DAYS = r"Mon|Tue|Wed|Thu|Fri|Sat|Sun"
# journald / syslog: "host ident[pid]: " (ident may be a unit: "app.service", "user@1000.service")
_HOST_IDENT = r" [\w.-]{1,64} (?P<who>[\w./@-]{1,128}\[\d{1,10}\]): ?"

RULES: tuple[PrefixRule, ...] = (
    PrefixRule(
        "kube",
        PrefixKind.TRANSPORT,
        r"\[(?P<who>pod/[^\]\s]{1,300})\] ?",
        "[pod/web-7f9c/app] ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        "rank",  # torchrun / torch.distributed.launch --tee
        PrefixKind.TRANSPORT,
        r"\[(?P<who>(?:rank|default)\d{1,6})\]:? ?",
        "[rank3]: ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        # sglang "[2026-08-28 05:10:05 DP1 TP3] ", diffusion "[08-28 05:10:05] ", "[01:38:57] "
        "bracket_stamp",
        PrefixKind.STAMP,
        rf"\[(?P<stamp>{_STAMP}|{_TIME})(?P<ranks>(?: [A-Z]{{1,4}}\d{{1,6}}){{0,8}})\]:? ?",
        "[2026-08-28 05:10:05 TP0] Scheduler hit an exception:",
        "Scheduler hit an exception:",
    ),
    PrefixRule(
        "glog",  # glog / torch "W0828 05:10:05.123456 1234 file.cpp:12] ", c10d "[W828 ...] "
        PrefixKind.RECORD,
        r"\[?(?P<level>[IWEF])\d{3,4} \d{2}:\d{2}:\d{2}\.\d{1,9} {1,8}\d{1,10} "
        r"[^\]\s]{1,256}:\d{1,7}\] ?",
        "E0828 05:10:05.123456 1234 init.cpp:12] boom",
        "boom",
    ),
    PrefixRule(
        "cloud",  # cloud logging export: "ERROR 2025-04-04T06:24:51.493646621Z "
        PrefixKind.NOISE,
        rf"(?:{level_alternation(CLOUD_SEVERITIES)}) (?=\d{{4}}-\d{{2}}-\d{{2}}T)",
        "ERROR 2025-04-04T06:24:51.493646621Z ValueError: x",
        "2025-04-04T06:24:51.493646621Z ValueError: x",
    ),
    PrefixRule(
        "dash",  # Python logging "2025-04-03 12:05:56,595 - __main__ - INFO - "
        PrefixKind.RECORD,
        rf"{_STAMP} - (?:[\w.<>-]{{1,128}} - )?(?P<level>{_LEVELS}) - ",
        "2025-04-03 12:05:56,595 - __main__ - ERROR - boom",
        "boom",
    ),
    PrefixRule(
        "rfc5424",  # "<165>1 2003-10-11T22:14:15.003Z host app 1234 ID47 [sd@1 a="b"] "
        PrefixKind.TRANSPORT,
        r"<\d{1,3}>\d{1,2} (?:-|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?"
        r"(?:Z|[+-]\d{2}:\d{2})) (?:-|\S{1,255}) (?P<who>\S{1,48} \S{1,128}) \S{1,32} "
        r"(?:-|(?:\[[^\]\n]{0,1024}\]){1,16}) ?\ufeff?",
        '<11>1 2026-12-01T06:02:08.123Z host python3 14047 - [meta x="1"] ValueError: x',
        "ValueError: x",
    ),
    PrefixRule(
        "journald",  # journalctl -o short-iso(-precise) / short-full / with-unit / short-unix /
        # short-monotonic (short and short-precise are the "syslog" shape below)
        PrefixKind.TRANSPORT,
        rf"(?:(?:{_DAYS}) \d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,9}})?"
        r" [A-Za-z][\w+-]{0,15}"
        r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})"
        r"|\[ {0,12}\d{1,12}\.\d{6}\]"
        r"|\d{9,11}\.\d{6})" + _HOST_IDENT,
        "2026-12-01T06:02:08+0000 host python3[14047]: ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        "stamp",  # bare timestamps: RFC 3339 (docker, kubectl --timestamps), logging's asctime
        PrefixKind.STAMP,
        rf"(?P<stamp>{_STAMP})(?: \||:| -)? ?",
        "2026-08-28T05:10:05.123456789Z ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        "syslog",  # RFC 3164 syslog, journalctl -o short / short-precise: "Aug 28 05:10:05 host
        # python3[123]: " (an optional "<PRI>" in front)
        PrefixKind.TRANSPORT,
        rf"(?:<\d{{1,3}}>)?(?:{_MONTHS}) {{1,2}}\d{{1,2}} \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,9}})?"
        r" [\w.-]{1,64} (?P<who>[\w./@-]{1,128}(?:\[\d{1,10}\])?): ?",
        "Dec 01 06:02:08.123456 host python3[14047]: ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        "level_name",  # Python's default "ERROR:root:" format
        PrefixKind.LEVEL,
        rf"(?P<level>{_LEVELS}):[\w.<>-]{{1,128}}:",
        "ERROR:root:boom",
        "boom",
    ),
    PrefixRule(
        "level",  # "ERROR ", "ERROR: ", "[ERROR] ", "ERROR - ", loguru "ERROR    | ", uvicorn
        # "INFO:     " (padded to ten columns)
        PrefixKind.LEVEL,
        rf"\[?(?P<level>{_LEVELS})\]?(?: {{0,8}}\| | - |:(?P<pad> {{0,8}})| (?=\S))",
        "ERROR    | boom",
        "boom",
    ),
    PrefixRule(
        "location",  # vLLM "[core.py:946] ", loguru "mod:func:12 - ", "[gpu_worker.py: 447] "
        PrefixKind.NOISE,
        r"\[[\w.<>/-]{1,128}: ?\d{1,7}\] |[\w.<>]{1,128}:[\w.<>]{1,128}:\d{1,7} - ",
        "[core.py:946] boom",
        "boom",
    ),
    PrefixRule(
        "ray",  # "(RayWorkerWrapper pid=1234) ", "(WorkerDict pid=77, ip=10.0.0.2) ", "(raylet) "
        PrefixKind.TRANSPORT,
        r"\((?P<who>[^()\n]{0,128}?\bpid=\d{1,10}[^()\n]{0,128}?"
        r"|(?:raylet|gcs_server|autoscaler|monitor|dashboard_agent|log_monitor)"
        r"(?:, ip=[\w.:]{1,64})?)\) ?",
        "(RayWorkerWrapper pid=1234) ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        "pytest",  # pytest's exception lines "E       ValueError: ..." (and the empty "E")
        PrefixKind.PYTEST,
        r"E(?: {3,64}|$)",
        "E       ValueError: x",
        "ValueError: x",
    ),
    PrefixRule(
        # journalctl -o verbose / export: an entry is a header (verbose) and one "FIELD=value"
        # line per field, indented by four in verbose. The entry's text is its MESSAGE field;
        # the other fields (_PID=, _HOSTNAME=, ...) are left as lines of no stream, so the
        # MESSAGE lines of consecutive entries read as one stream, a traceback whole again.
        "journal_field",
        PrefixKind.TRANSPORT,
        r"(?: {4})?(?P<who>MESSAGE)=",
        "    MESSAGE=ValueError: x",
        "ValueError: x",
        indented=True,
    ),
    PrefixRule(
        "tag",  # any other bracketed tag: "[TP0] ", "[worker-3] ", "[gpu=0] ", "[Gloo] "
        PrefixKind.TAG,
        r"\[(?P<tag>[A-Za-z][\w.:/@=-]{0,63})\]:? ",
        "[TP0] ValueError: x",
        "ValueError: x",
    ),
)

_GROUP_RE = re.compile(r"\(\?P<(\w+)>")


def _compile(rules: tuple[PrefixRule, ...]) -> re.Pattern[str]:
    # A rule's own groups are namespaced "<rule>__<group>" so that rules can reuse the names
    # their kind reads ("who", "level", ...).
    branches = []
    for rule in rules:
        shape = _GROUP_RE.sub(rf"(?P<{rule.name}__\1>", rule.shape)
        branches.append(f"(?P<K_{rule.name}>{shape})")
    return re.compile("|".join(branches))


_COMPILED = _compile(RULES)
# (With no such rule, a pattern that never matches: an empty alternation would match anything.)
_INDENTED = (
    _compile(tuple(r for r in RULES if r.indented))
    if any(r.indented for r in RULES)
    else re.compile(r"(?!)")
)
_BY_GROUP = {f"K_{rule.name}": rule for rule in RULES}


def compiled() -> re.Pattern[str]:
    """The one alternation of every rule, in table order."""
    return _COMPILED


def compiled_indented() -> re.Pattern[str]:
    """The alternation of the rules whose shape may begin with whitespace."""
    return _INDENTED


def rule_for(match: re.Match[str]) -> PrefixRule:
    """The rule a match of :func:`compiled` came from."""
    return _BY_GROUP[match.lastgroup or ""]
