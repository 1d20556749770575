r"""Per-line prefix rules: one table of named shapes, each with an example that is also its test.

Each shape is one :class:`PrefixRule`: a name, a regex, what it tells about the line
(:class:`PrefixKind`), and an example with the text that must remain once that rule stripped
it (``tests/test_prefixes.py`` runs them all). The rules are compiled into ONE alternation
(``match.lastgroup`` names the rule), tried, once the table has served a few thousand
look-ups, with only the rules that can begin with the character at hand (``by_first``). Order
matters where shapes overlap. Every repetition is
bounded and every rule anchored: nothing backtracks catastrophically.
"""

from __future__ import annotations

import enum
import importlib
import re
import threading
from dataclasses import dataclass
from types import ModuleType

from errkb.parse.vocabulary import CLOUD_SEVERITIES, level_alternation

__all__ = [
    "RULES",
    "WARM_AFTER",
    "ByFirst",
    "PrefixKind",
    "PrefixRule",
    "by_first",
    "compiled",
    "compiled_indented",
    "first_chars",
    "rule_for",
]


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
    #: The shape may begin with whitespace (then it is also tried on indented lines).
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
        # journalctl -o verbose / export: the text is the MESSAGE field; other fields have no
        # stream.
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


def _branch(rule: PrefixRule) -> str:
    # A rule's own groups are namespaced "<rule>__<group>".
    shape = _GROUP_RE.sub(rf"(?P<{rule.name}__\1>", rule.shape)
    return f"(?P<K_{rule.name}>{shape})"


def _compile(rules: tuple[PrefixRule, ...]) -> re.Pattern[str]:
    return re.compile("|".join(_branch(rule) for rule in rules))


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


#: Every ASCII character: what a shape may begin with when its analysis cannot say.
_ASCII = frozenset(chr(c) for c in range(128))


def _sre() -> tuple[ModuleType, ModuleType] | None:
    """Python's own regex parser and its constants, or None where this Python has neither."""
    try:
        return importlib.import_module("re._parser"), importlib.import_module("re._constants")
    except ImportError:  # pragma: no cover - Python before 3.11 names them sre_parse
        return None


def first_chars(shape: str) -> frozenset[str] | None:
    r"""The ASCII characters a match of ``shape`` can begin with (a superset), or None: any."""
    sre = _sre()
    if sre is None:
        return None
    parser, consts = sre
    try:
        tree = parser.parse(shape)
        if tree.state.flags & re.IGNORECASE:
            return None
        found, nullable = _first_of(list(tree), consts)
    except (AttributeError, TypeError, ValueError, re.error):  # pragma: no cover - another Python
        return None
    if nullable or found is None:
        return None
    return frozenset(found)


def _first_of(items: list[tuple[object, object]], c: ModuleType) -> tuple[set[str] | None, bool]:
    """(First characters, may match empty) of a sequence of parsed items; None: any character."""
    out: set[str] = set()
    for op, av in items:
        found, nullable = _first_item(op, av, c)
        if found is None:
            return None, True
        out |= found
        if not nullable:
            return out, False
    return out, True


def _first_item(op: object, av: object, c: ModuleType) -> tuple[set[str] | None, bool]:
    if op is c.LITERAL and isinstance(av, int):
        return ({chr(av)} if av < 128 else set()), False
    if op is c.NOT_LITERAL and isinstance(av, int):
        return set(_ASCII - {chr(av)}), False
    if op is c.ANY:
        return set(_ASCII), False
    if op is c.IN and isinstance(av, list):
        return _class_members(av, c), False
    if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
        return set(), True  # zero width: what follows begins the match
    if op is c.SUBPATTERN and isinstance(av, tuple):
        _group, add_flags, _del_flags, sub = av
        if add_flags & re.IGNORECASE:
            return None, True
        return _first_of(list(sub), c)
    if op is c.ATOMIC_GROUP:
        return _first_of(list(av), c)  # type: ignore[call-overload]
    if op is c.BRANCH and isinstance(av, tuple):
        out: set[str] = set()
        empty = False
        for branch in av[1]:
            found, nullable = _first_of(list(branch), c)
            if found is None:
                return None, True
            out |= found
            empty = empty or nullable
        return out, empty
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and isinstance(av, tuple):
        low, _high, sub = av
        found, nullable = _first_of(list(sub), c)
        return found, nullable or low == 0
    return None, True  # a back reference, a conditional, anything new: any character


def _class_members(items: list[tuple[object, object]], c: ModuleType) -> set[str]:
    """The ASCII members of a character class ``[...]`` as parsed."""
    members: set[str] = set()
    negate = False
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL and isinstance(av, int):
            if av < 128:
                members.add(chr(av))
        elif op is c.RANGE and isinstance(av, tuple):
            low, high = av
            members.update(chr(k) for k in range(low, min(high, 127) + 1))
        elif op is c.CATEGORY:
            members.update(_category(str(av)))
        else:
            return set(_ASCII)  # pragma: no cover - a class item this does not know
    return set(_ASCII - members) if negate else members


_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


def _category(name: str) -> set[str]:
    """The ASCII members of a category, by the engine itself; every character if unknown."""
    probe = _CATEGORIES.get(name)
    if probe is None:
        return set(_ASCII)  # pragma: no cover - a category this does not know
    one = re.compile(probe)
    return {ch for ch in _ASCII if one.fullmatch(ch)}


class ByFirst(dict[str, "re.Pattern[str] | None"]):
    """Character -> the alternation of the rules that can begin with it, or None: no rule can.

    A subset matches exactly as ``whole`` does at a position starting with its character, only
    sooner; reading the rules' first characters and compiling the subsets costs more than a short
    input's lines gain from it. So the first ``warm_after`` look-ups are answered by ``whole``
    and not kept: a table used fewer times never builds a subset.
    """

    def __init__(
        self, rules: tuple[PrefixRule, ...], whole: re.Pattern[str], *, warm_after: int = 0
    ) -> None:
        super().__init__()
        self._rules = rules
        self._whole = whole
        self._cold = warm_after  #: look-ups still to answer by ``whole`` alone
        self._firsts: list[frozenset[str] | None] | None = None
        self._subsets: dict[tuple[int, ...], re.Pattern[str] | None] = {}
        self._lock = threading.Lock()

    def __missing__(self, char: str) -> re.Pattern[str] | None:
        with self._lock:
            if len(char) != 1 or char not in _ASCII:
                return self._whole
            if self._cold > 0:
                self._cold -= 1
                return self._whole
            if self._firsts is None:
                self._firsts = [first_chars(rule.shape) for rule in self._rules]
            picked = tuple(
                k for k, first in enumerate(self._firsts) if first is None or char in first
            )
            if picked not in self._subsets:
                self._subsets[picked] = (
                    re.compile("|".join(_branch(self._rules[k]) for k in picked))
                    if picked
                    else None
                )
            found = self[char] = self._subsets[picked]
            return found


#: Look-ups of the shared table answered by the whole alternation before it builds its subsets
#: (a line takes one to three): a paste of a few thousand lines compiles no subset.
WARM_AFTER = 4096
_BY_FIRST = ByFirst(RULES, _COMPILED, warm_after=WARM_AFTER)


def by_first() -> ByFirst:
    """The rules' alternation by the first character at the match position (``ByFirst``).

    Shared by every caller; its first ``WARM_AFTER`` look-ups are answered by :func:`compiled`.
    """
    return _BY_FIRST
