"""Records: the schemaVersion-2 error record, its validation, and its typed value (``Record``).

``schemas/record.v2.schema.json`` says what JSON Schema can; ``_code_rules`` adds the rest;
``_limit_rules`` bounds what one record can cost everyone (``MAX_MESSAGE_CHARS``,
``MAX_PLACEHOLDERS``, a matcher RE2 compiles), before anything expensive. Unknown extra fields
are kept verbatim; an id off upstream's formula is a warning, not an error.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from errkb import _lazy
from errkb._resources import schema_path
from errkb.errors import Problem
from errkb.records.fields import FIELDS, KNOWN_FIELDS

if TYPE_CHECKING:
    from errkb.records.record import Record as Record

# The fields the contract knows come from the one field table, errkb.records.fields.
_KNOWN = frozenset(KNOWN_FIELDS)
MAX_SOURCE_LINES = 40
#: errorMessage and messagePattern are at most this long (the longest real one is under 700).
MAX_MESSAGE_CHARS = 16_384
#: Integers (lineNumber, sourceCodeStart, sourceCodeEnd) fit a signed 32-bit column.
MAX_INT = 2_147_483_647
#: Prose fields at most this many characters, lists at most ``MAX_ITEMS`` items of
#: ``MAX_ITEM_CHARS`` (a tag ``MAX_TAG_CHARS``): every match returns its record whole. Far above
#: upstream's real records; past them a record is invalid, never silently cut.
MAX_PROSE_CHARS = 65_536
MAX_ITEMS = 256
MAX_ITEM_CHARS = 4_096
MAX_TAG_CHARS = 100
#: Placeholders per errorMessage and groups per messagePattern (RE2 capture is superlinear).
MAX_PLACEHOLDERS = 64
#: Below this length a template regex always compiles (tested); above, validation compiles it.
_COMPILE_CHECK_CHARS = 2_048
#: A datasetVersion more than this far ahead of the clock is refused (it would block updates).
MAX_VERSION_AHEAD = dt.timedelta(days=2)

_validators_lock = threading.Lock()
_validators: dict[str, Any] = {}


def schema_validator(name: str) -> Any:
    """A cached jsonschema validator for one of our schema files (built once per process)."""
    with _validators_lock:
        if name not in _validators:
            from jsonschema import Draft202012Validator
            from referencing import Registry, Resource

            def load(filename: str) -> Any:
                return json.loads(schema_path(filename).read_text(encoding="utf-8"))

            record_schema = load("record.v2.schema.json")
            registry: Registry[Any] = Registry().with_resources(
                [
                    ("record.v2.schema.json", Resource.from_contents(record_schema)),
                    (record_schema["$id"], Resource.from_contents(record_schema)),
                ]
            )
            schema = load(name)
            Draft202012Validator.check_schema(schema)
            _validators[name] = Draft202012Validator(
                schema,
                registry=registry,
                format_checker=Draft202012Validator.FORMAT_CHECKER,
            )
        return _validators[name]


@dataclass(frozen=True)
class Checked:
    """Outcome of validating one record: its problems (errors) and warnings."""

    problems: tuple[Problem, ...]
    warnings: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_record(obj: Any, *, source: str, location: str = "", path_prefix: str = "$") -> Checked:
    """Validate one record object; every broken rule is reported, not only the first."""
    rid = obj.get("id") if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None

    def problem(json_path: str, rule: str) -> Problem:
        return Problem(source, location, rid, json_path, rule)

    problems: list[Problem] = []
    # The fast path proves most records valid; anything else goes through jsonschema.
    fast = isinstance(obj, dict) and fast_valid(obj)
    errors = (
        []
        if fast
        else sorted(
            schema_validator("record.v2.schema.json").iter_errors(obj),
            key=lambda e: list(e.absolute_path),
        )
    )
    for err in errors:
        problems.append(problem(_json_path(path_prefix, err.absolute_path), _rule(err)))
    if isinstance(obj, dict):
        problems.extend(problem(f"{path_prefix}.{p}", r) for p, r in _code_rules(obj))
        problems.extend(problem(f"{path_prefix}.{p}", r) for p, r in _limit_rules(obj))
    warnings: list[Problem] = []
    if isinstance(obj, dict) and not problems:
        from errkb.records import upstream

        try:
            expected = upstream.record_id(
                obj["repo"], obj["errorCode"], obj["errorMessage"], obj["filePath"]
            )
        except UnicodeEncodeError:
            from errkb.records.reader import lone_surrogate

            where = lone_surrogate(obj, path_prefix) or path_prefix
            rule = "lone UTF-16 surrogate: not valid Unicode text"
            return Checked((Problem(source, location, None, where, rule),), ())
        if expected != obj["id"]:
            warnings.append(
                problem(
                    f"{path_prefix}.id",
                    f"id does not follow the upstream formula (expected {expected})",
                )
            )
    return Checked(tuple(problems), tuple(warnings))


# Only a write checks records: compiled on first use.
_ID = _lazy.pattern(r"[0-9a-f]{16}")
_REPO = _lazy.pattern(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_KEBAB = _lazy.pattern(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SHA = _lazy.pattern(r"[0-9a-f]{40}")
_NONSPACE = _lazy.pattern(r"\S")
# Conservative shapes: anything else is left to jsonschema's format checkers.
_HTTP_URL = _lazy.pattern(
    r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?(?:#[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)?"
)
_DATE_TIME = _lazy.pattern(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
_ERROR_TYPES: frozenset[str | None] = frozenset(
    {"exception", "error_code", "console", "http", "validation", "panic"}
)
_SEVERITIES: frozenset[str | None] = frozenset({"critical", "error", "warning", "info"})
_STRATEGIES: frozenset[str | None] = frozenset(
    {"try-catch", "type-guard", "validation", "retry", "fallback", None}
)
_REQUIRED = frozenset(f.name for f in FIELDS if not f.optional)


def _date_time(value: object) -> bool:
    if not isinstance(value, str) or not _DATE_TIME().fullmatch(value):
        return False
    import datetime as dt

    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def fast_valid(obj: Mapping[str, Any]) -> bool:
    """True only when ``obj`` certainly satisfies record.v2.schema.json (False: ask jsonschema)."""

    def text(key: str, nullable: bool = False, nonblank: bool = False) -> bool:
        value = obj[key]
        if value is None:
            return nullable
        return (
            isinstance(value, str)
            and len(value) <= MAX_PROSE_CHARS
            and (not nonblank or bool(_NONSPACE().search(value)))
        )

    def integer(key: str, low: int, high: int = MAX_INT) -> bool:
        value = obj[key]
        if value is None:
            return True
        return type(value) is int and low <= value <= high

    def strings(
        key: str, pattern: re.Pattern[str] | None = None, longest: int = MAX_ITEM_CHARS
    ) -> bool:
        value = obj[key]
        return (
            isinstance(value, list)
            and len(value) <= MAX_ITEMS
            and all(
                isinstance(v, str)
                and len(v) <= longest
                and (pattern is None or pattern.fullmatch(v))
                for v in value
            )
        )

    def shaped(key: str, pattern: re.Pattern[str], nullable: bool = False) -> bool:
        value = obj.get(key)
        if value is None:
            return nullable
        return isinstance(value, str) and bool(pattern.fullmatch(value))

    def nonempty(key: str, nullable: bool = False) -> bool:
        value = obj[key]
        return (nullable and value is None) or (isinstance(value, str) and value != "")

    def choice(key: str, allowed: frozenset[str | None]) -> bool:
        value = obj[key]
        return (value is None or isinstance(value, str)) and value in allowed

    if _REQUIRED - obj.keys():
        return False
    return (
        shaped("id", _ID()) and shaped("repo", _REPO()) and shaped("slug", _KEBAB())
        and len(obj["slug"]) <= 50
        and nonempty("errorCode", True) and nonempty("errorMessage")
        and nonempty("messagePattern") and choice("errorType", _ERROR_TYPES)
        and nonempty("errorClass", True) and integer("httpStatus", 100, 599)
        and choice("severity", _SEVERITIES) and nonempty("filePath")
        and integer("lineNumber", 1) and text("sourceCode", nullable=True)
        and integer("sourceCodeStart", 1) and integer("sourceCodeEnd", 1)
        and shaped("githubUrl", _HTTP_URL())
        and text("documentation", nonblank=True) and text("triggerScenarios", nonblank=True)
        and text("commonSituations", nonblank=True) and strings("solutions")
        and text("exampleFix", nullable=True) and choice("handlingStrategy", _STRATEGIES)
        and text("validationCode", nullable=True) and text("typeGuard", nullable=True)
        and text("tryCatchPattern", nullable=True) and strings("preventionTips")
        and strings("tags", _KEBAB(), MAX_TAG_CHARS)
        and shaped("backgroundTag", _KEBAB(), nullable=True)
        and len(obj.get("backgroundTag") or "") <= MAX_TAG_CHARS
        and (obj.get("contentChangedAt") is None or _date_time(obj["contentChangedAt"]))
        and shaped("analyzedSha", _SHA()) and _date_time(obj["analyzedAt"])
        and type(obj["schemaVersion"]) is int and obj["schemaVersion"] == 2
    )  # fmt: skip


def _code_rules(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    source = obj.get("sourceCode")
    if isinstance(source, str) and len(source.splitlines()) > MAX_SOURCE_LINES:
        yield "sourceCode", f"sourceCode has more than {MAX_SOURCE_LINES} lines"
    start, end, line = obj.get("sourceCodeStart"), obj.get("sourceCodeEnd"), obj.get("lineNumber")
    ints = (int,)
    if isinstance(start, ints) and isinstance(end, ints) and end < start:
        yield "sourceCodeEnd", f"sourceCodeEnd ({end}) is before sourceCodeStart ({start})"
    if isinstance(start, ints) and isinstance(line, ints) and line < start:
        yield "lineNumber", f"lineNumber ({line}) is before sourceCodeStart ({start})"


def oversized(obj: Mapping[str, Any]) -> bool:
    """True when errorMessage or messagePattern is over ``MAX_MESSAGE_CHARS`` (skip costly work)."""
    return any(
        isinstance(obj.get(key), str) and len(obj[key]) > MAX_MESSAGE_CHARS
        for key in ("errorMessage", "messagePattern")
    )


def _limit_rules(obj: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    message, pattern = obj.get("errorMessage"), obj.get("messagePattern")
    if not (isinstance(message, str) and isinstance(pattern, str)):
        return  # the schema reports it
    too_long = False
    for key, value in (("errorMessage", message), ("messagePattern", pattern)):
        if len(value) > MAX_MESSAGE_CHARS:
            too_long = True
            yield key, f"{len(value)} characters, over the {MAX_MESSAGE_CHARS}-character limit"
    if too_long:
        return  # nothing below is worth computing on such a record
    from errkb.records.patterns import _name_groups, compile_error, compile_record
    from errkb.records.template import parse_template

    # Counting "{" and "(" is a cheap upper bound; the parsers run only past it.
    placeholders = message.count("{")
    if placeholders > MAX_PLACEHOLDERS:
        placeholders = len(parse_template(message).placeholders)
        if placeholders > MAX_PLACEHOLDERS:
            yield (
                "errorMessage",
                f"{placeholders} placeholders, over the limit of {MAX_PLACEHOLDERS}",
            )
            return
    if pattern.count("(") > MAX_PLACEHOLDERS:
        groups = _name_groups(pattern)[1]
        if groups > MAX_PLACEHOLDERS:
            yield "messagePattern", f"{groups} capture groups, over the limit of {MAX_PLACEHOLDERS}"
            return
    if len(message) + len(pattern) > _COMPILE_CHECK_CHARS:
        rid = obj.get("id")
        spec = compile_record(rid if isinstance(rid, str) else "", message, pattern)
        error = compile_error(spec.regex)
        if error is not None:
            yield "messagePattern", f"the record's matcher does not compile under RE2: {error}"


def dataset_version_problem(value: object, *, now: dt.datetime | None = None) -> str | None:
    """Why ``value`` is not an RFC 3339 date-time with offset, not too far ahead, or None."""
    if not isinstance(value, str) or not _date_time(value):
        return (
            f"datasetVersion {_short(value)} is not an ISO timestamp "
            "(an RFC 3339 date-time with a time and a time zone)"
        )
    when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    now = now or dt.datetime.now(dt.UTC)
    if when > now + MAX_VERSION_AHEAD:
        return (
            f"datasetVersion {value} is more than {MAX_VERSION_AHEAD.days} days in the future "
            f"(the clock says {now.isoformat(timespec='seconds')})"
        )
    return None


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_path(prefix: str, parts: Any) -> str:
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _rule(err: Any) -> str:
    message = str(err.message)
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{message} ({err.validator})"


def check_envelope(obj: Mapping[str, Any], *, source: str, location: str) -> list[Problem]:
    """Problems with an envelope's own fields; its record is checked by ``check_record``."""
    rid = obj["record"].get("id") if isinstance(obj.get("record"), dict) else None
    # The record is replaced by a stand-in so only the envelope's own rules report here.
    errors = schema_validator("envelope.v2.schema.json").iter_errors({**obj, "record": {}})
    problems = [
        Problem(source, location, rid, _json_path("$", err.absolute_path), _rule(err))
        for err in errors
        if list(err.absolute_path)[:1] != ["record"] and err.validator != "$ref"
    ]
    version = obj.get("datasetVersion")
    if version is not None and not problems and (why := dataset_version_problem(version)):
        problems.append(Problem(source, location, rid, "$.datasetVersion", why))
    return problems


def unknown_fields(obj: Mapping[str, Any]) -> list[str]:
    """Names of fields the v2 contract does not know, in the record's order."""
    return [k for k in obj if k not in _KNOWN]


#: One encoder each, made once (``json.dumps`` with options builds one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
_VERBATIM = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@functools.cache
def orjson_functions() -> tuple[Callable[[str], Any], Callable[..., bytes]] | None:
    """Orjson's ``loads`` and ``dumps`` where installed (``errkb[fast]``), else None."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads, orjson.dumps


#: orjson's ``OPT_SORT_KEYS`` (its value is part of orjson's stable API).
_SORT_KEYS = 1 << 5


def _fast(obj: Mapping[str, Any], option: int) -> bytes | None:
    """``obj`` as orjson writes it, or None where its text could differ from ``json``'s."""
    fast = orjson_functions()
    if fast is None:
        return None
    try:
        return fast[1](obj, option=option)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


def decode_json(text: str) -> Any:
    """``json.loads(text)``, by orjson only where it writes the value back as exactly ``text``."""
    fast = orjson_functions()
    if fast is not None:
        loads, dumps = fast
        try:
            value = loads(text)
            if dumps(value) == text.encode("utf-8"):
                return value
        except (ValueError, TypeError, UnicodeEncodeError):  # orjson's errors; a lone surrogate
            pass
    return json.loads(text)


def verbatim_json(obj: Mapping[str, Any], *, floatless: bool = False) -> str:
    """Compact JSON keeping the record's own key order (export); ``floatless``: see ``_fast``."""
    if floatless and (text := _fast(obj, 0)) is not None:
        return text.decode("utf-8")
    return _VERBATIM(obj)


def content_hash(obj: Mapping[str, Any], *, floatless: bool = False) -> str:
    """sha256 of the canonical JSON: tells a changed record from an unchanged one."""
    import hashlib  # only writers need it; loading OpenSSL would slow every explain's start

    if floatless and (text := _fast(obj, _SORT_KEYS)) is not None:
        return hashlib.sha256(text).hexdigest()
    return hashlib.sha256(_CANONICAL(obj).encode("utf-8")).hexdigest()


#: The typed value, defined in its own module and imported on first use (PEP 562): explaining
#: reads records as JSON and never builds one.
_LAZY: dict[str, tuple[str, str]] = {"Record": ("errkb.records.record", "Record")}


def __getattr__(name: str) -> object:
    return _lazy.load(__name__, globals(), _LAZY, name)
