"""A record's specificity: how much of a message its template's literals pin down.

Many templates say almost nothing alone (``Expected {predicate_err}``, ``error: {msg}``,
``name {col!r} is not defined``): a match of one is evidence only with the record's class and
a frame in its file. Measured once per record, from the template alone: **informative
literal words** (not in ``COMMON_WORDS``, weighed by length, capped), **a slot that can absorb
the message** (one or two words beside a placeholder), and **the interpreter's own messages**
(``INTERPRETER_MESSAGES``). ``specificity`` in [0, 1] is ``informative / (informative +
HALF)``, capped for those shapes; ``SPECIFIC_LINE`` divides generic from specific
(``is_generic``); ``errkb.match.decide`` uses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from errkb import _lazy

if TYPE_CHECKING:
    from errkb.records.template import Template

__all__ = [
    "COMMON_WORDS",
    "FREQUENT_WORDS",
    "INTERPRETER_MESSAGES",
    "SPECIFIC_LINE",
    "is_generic",
    "specificity",
]

#: A template at or above this specificity is specific: its match alone can be an answer.
SPECIFIC_LINE = 0.5
#: The informative weight at which a template is half-way to fully specific (0.5): two or three
#: uncommon words of ordinary length.
HALF = 16.0
#: One word's weight at most: a long identifier is one piece of evidence, not a sentence.
MAX_WORD_WEIGHT = 10
#: A template with fewer informative words than this stays generic whatever their length.
MIN_WORDS = 2
#: Caps for the generic shapes (each below ``SPECIFIC_LINE``).
FEW_WORDS_CAP = 0.45
ABSORBING_CAP = 0.3
INTERPRETER_CAP = 0.2

# Compiled on first use: explain imports this module (``is_generic``) and measures nothing.
_WORD = _lazy.pattern(r"[A-Za-z][A-Za-z0-9_']*")
_PLACEHOLDER = "\x00"
_QUOTED_SLOT = _lazy.pattern(r"""(['"`]?)\x00\1""")
_SPACES = _lazy.pattern(r"\s+")

#: Words that carry no evidence of a message's source (function words, shared error
#: vocabulary, ordinary log words). Lower case.
_COMMON_TEXT = """
    a about above after again against all allowed already also an and any are arg args argument
    arguments as at attribute available bad be been before being below between both but by call
    called can cannot can't could data default defined did didn't do does doesn't done during
    each either else empty end enough error errors exception exist exists expected expecting
    fail failed failure false field file files for found from function get given got had has
    have here how however http https id if in info input instance int into invalid is isn't it
    its key keys kind last least length less line list like long may message method might
    missing more most must name named names need needs new no none not now null number object
    of off ok on one only option options or other out output over parameter parameters path
    please provided python raise raised read received request required result return returned
    run running same see set should since size so some str string such support supported
    than that the their them then there these they this those to too true try two type types
    unable under unexpected unknown unsupported up url use used uses using valid value values
    version was wasn't we were what when where which while will with without would wrong yet
    you your
"""
#: Common and frequent words as ``python -m bench.common_words CORPUS`` lists them.
_DATA_COMMON = """
actions array bin build bytes callable class closed column com conda cpp entering git github
home instead integer keyword lib mode module negative non objects opt package packages passed
remote requires runner site specified specify test tuple user work
"""
_DATA_FREQUENT = """
add address annotation arrays async attempted axes axis backend base because binary body boolean
bound byte certificate character check chunk chunks client close code collection columns command
config connection construct contain contains content context convert copy core create current
currently dask definition delete determine dialect dict dictionary different dimension
dimensions directory don't dtype duplicate element elements encoding equal event exactly
existing explicit expression extension fields filename find first float format functions
generator generic greater group handle header host implemented import include index inside
install installed internal iterable know label large level library load loop many mapped match
maximum metadata mismatch multiple numpy once open operation order outside parse pass passing
pattern pickle pip platform position positional positive prefix present protocol provide query
range registered relationship relative resolve response row scalar schema send sequence server
session shape signature single socket source sql ssl start state statement status strategy
stream strings subclass supplied table tag takes target task template text time timeout token
transaction update variable wheel worker write zero
"""
COMMON_WORDS: frozenset[str] = frozenset(_COMMON_TEXT.split()) | frozenset(_DATA_COMMON.split())
#: Words that weigh half: frequent across the records, each still some evidence.
FREQUENT_WORDS: frozenset[str] = frozenset(_DATA_FREQUENT.split()) - COMMON_WORDS

#: Messages CPython itself prints, as masked templates (``{}``, lower case): no evidence of source.
_INTERPRETER_TEXT = """
    name {} is not defined
    name {} is not defined. did you mean: {}?
    free variable {} referenced before assignment in enclosing scope
    local variable {} referenced before assignment
    cannot access local variable {} where it is not associated with a value
    {} object has no attribute {}
    module {} has no attribute {}
    type object {} has no attribute {}
    {} object is not subscriptable
    {} object is not callable
    {} object is not iterable
    {} object does not support item assignment
    {} object cannot be interpreted as an integer
    {}() takes {} positional arguments but {} were given
    {}() takes {} positional argument but {} were given
    {}() got an unexpected keyword argument {}
    {}() got multiple values for argument {}
    {}() missing {} required positional argument: {}
    {}() missing {} required positional arguments: {}
    unsupported operand type(s) for {}: {} and {}
    can only concatenate str (not {}) to str
    cannot import name {} from {}
    cannot import name {} from {} ({})
    no module named {}
    list index out of range
    tuple index out of range
    string index out of range
    division by zero
    integer division or modulo by zero
    float division by zero
    maximum recursion depth exceeded
    maximum recursion depth exceeded while calling a python object
    invalid literal for int() with base {}: {}
    could not convert string to float: {}
    not enough values to unpack (expected {}, got {})
    too many values to unpack (expected {})
    dictionary changed size during iteration
    {}
    [errno {}] no such file or directory: {}
    [errno {}] {}: {}
    [errno {}] {}
"""
INTERPRETER_MESSAGES: frozenset[str] = frozenset(
    line.strip() for line in _INTERPRETER_TEXT.splitlines() if line.strip()
)


def specificity(template: Template | str) -> float:
    """The template's specificity in [0, 1], rounded to three places (see the module text)."""
    if isinstance(template, str):
        from errkb.records.template import parse_template  # a write scores; explain reads

        template = parse_template(template)
    words = informative_words(template.literals)
    weight = sum(_weight(w) for w in words)
    score = weight / (weight + HALF)
    if len(words) < MIN_WORDS:
        score = min(score, FEW_WORDS_CAP)
    if template.placeholders and _absorbing(template):
        score = min(score, ABSORBING_CAP)
    if interpreter_message(template):
        score = min(score, INTERPRETER_CAP)
    return round(score, 3)


def is_generic(score: float) -> bool:
    """Tell whether a specificity is below the line: the match alone is no answer."""
    return score < SPECIFIC_LINE


def informative_words(literals: Iterable[str]) -> tuple[str, ...]:
    """The distinct literal words that are not ``COMMON_WORDS`` (two letters or more)."""
    out: dict[str, None] = {}
    for text in literals:
        for word in _WORD().findall(text):
            key = word.lower().strip("'")
            if len(key) >= 2 and key not in COMMON_WORDS:
                out.setdefault(key, None)
    return tuple(out)


def interpreter_message(template: Template) -> bool:
    """Tell whether the template prints a message CPython itself prints."""
    return masked_text(template) in INTERPRETER_MESSAGES


def masked_text(template: Template) -> str:
    """The template in lower case with each placeholder (and the quotes around it) as ``{}``."""
    from errkb.records.template import Literal

    parts = [s.text if isinstance(s, Literal) else _PLACEHOLDER for s in template.segments]
    text = _QUOTED_SLOT().sub("{}", "".join(parts))
    return _SPACES().sub(" ", text).strip().rstrip(".").lower()


def _absorbing(template: Template) -> bool:
    """One placeholder can take nearly the whole message: at most two literal words in all."""
    count = sum(len(_WORD().findall(text)) for text in template.literals)
    return count <= 2


def _weight(word: str) -> float:
    """A word's length (capped), halved for a frequent word; two more for an identifier."""
    weight: float = min(len(word), MAX_WORD_WEIGHT)
    if word in FREQUENT_WORDS:
        weight /= 2
    if "_" in word or any(c.isdigit() for c in word):
        weight += 2  # a word no prose holds: an identifier, a unit, a name with digits
    return weight
