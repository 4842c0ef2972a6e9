"""The C twins in ``reward_plugins._speedups`` return exactly what their Python references return.

The package uses the compiled tag scan and SQuAD normalizer where they were built, and the
Python references otherwise; the rest of the suite tests whichever is active against verl and
the regex oracles. Here the two are compared with each other directly, on generated text that
stresses what C code can get wrong: every string width (1, 2 and 4 bytes per character), texts
longer than the C stack buffer, tag and article fragments at word boundaries, odd whitespace.

Inputs that are not exact ``str`` (str subclasses whose methods are overridden, other types, a
``first``/``spaced`` flag that is not a bool) must give what the Python reference gives, value or
exception type; those comparisons run in a child process, so that a crash of the C code fails a
test instead of killing the test run.
"""

from __future__ import annotations

import importlib.util
import os
import random
import string
import subprocess
import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins.metrics.ngrams as ngrams_module
import reward_plugins.metrics.rouge as rouge_module
from reward_plugins.extract import scan_tags_python
from reward_plugins.metrics import Chrf, RougeN
from reward_plugins.metrics.ngrams import ngram_matches_python
from reward_plugins.text.normalize import normalize_squad_python

if importlib.util.find_spec("reward_plugins._speedups") is None:
    # CI builds the package with a compiler, so there a missing extension is a failure.
    if os.environ.get("CI") == "true":
        raise AssertionError("reward_plugins._speedups was not built (CI=true needs it)")
    pytest.skip("the C extension is not built here", allow_module_level=True)

from reward_plugins import _speedups
from reward_plugins.extract import _scan_tags
from reward_plugins.text.normalize import _normalize_squad

# The module, not the function that reward_plugins.metrics exports under the same name.
chrf_module = importlib.import_module("reward_plugins.metrics.chrf")

WIDE = ["é", "\u4e2d", "\U0001f600", "\u2019", "\u3000", "\x85", "\u0130", "_"]
"""Latin-1, 2-byte, 4-byte characters; a typographic quote, Unicode spaces, a character that
lower-cases into two, and the word character that is ASCII punctuation."""

TAG_FRAGMENTS = ["<answer>", "</answer>", "<answer", "</answer", "answer>", "<", ">", "/", "a"]
TAGS = ["answer", "think", "/x", "", "a<b", "é", "\u4e2d\U0001f600"]

ARTICLE_FRAGMENTS = ["a", "an", "the", "The", "A", "AN", "x", "1", " ", "  ", "\t", "\n"]
PUNCTUATION = [*string.punctuation, "\x7f", "\x1c", "\x00"]


def soup(fragments: list[str]) -> st.SearchStrategy[str]:
    pieces = st.sampled_from(fragments) | st.text(max_size=3)
    return st.lists(pieces, max_size=40).map("".join)


def test_the_package_uses_the_twins() -> None:
    assert _scan_tags is _speedups.scan_tags
    assert _normalize_squad is _speedups.normalize_squad


@settings(max_examples=3000, deadline=None)
@given(
    soup(TAG_FRAGMENTS + WIDE + [f"<{tag}>" for tag in TAGS] + [f"</{tag}>" for tag in TAGS]),
    st.sampled_from(TAGS),
    st.booleans(),
)
def test_scan_tags_matches_python(text: str, tag: str, first: bool) -> None:
    assert _speedups.scan_tags(text, tag, first) == scan_tags_python(text, tag, first)


@pytest.mark.parametrize("wide", ["", "é", "\u4e2d", "\U0001f600"])
@pytest.mark.parametrize("first", [False, True])
def test_scan_tags_on_long_texts(wide: str, first: bool) -> None:
    text = (f"<answer>{wide}x" * 500 + "</answer>" * 3 + wide) * 20
    assert _speedups.scan_tags(text, "answer", first) == scan_tags_python(text, "answer", first)


@settings(max_examples=3000, deadline=None)
@given(soup(ARTICLE_FRAGMENTS + PUNCTUATION + WIDE), st.booleans())
def test_normalize_squad_matches_python(text: str, spaced: bool) -> None:
    assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


@settings(max_examples=1000, deadline=None)
@given(st.text(), st.booleans())
def test_normalize_squad_matches_python_on_any_text(text: str, spaced: bool) -> None:
    assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


@pytest.mark.parametrize("wide", ["", "é", "\u4e2d", "\U0001f600"])
def test_normalize_squad_beyond_the_stack_buffer(wide: str) -> None:
    for length in (255, 256, 257, 10_000):
        text = ("The a-n " + wide + "an, THE_x ")[:9] * (length // 9 + 1)
        text = text[:length]
        for spaced in (False, True):
            assert _speedups.normalize_squad(text, spaced) == normalize_squad_python(text, spaced)


def test_wrong_argument_counts_name_the_function() -> None:
    with pytest.raises(TypeError, match="scan_tags"):
        _speedups.scan_tags("<answer>x</answer>", "answer")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="normalize_squad"):
        _speedups.normalize_squad("x")  # type: ignore[call-arg]


def memory_growth(calls: Callable[[], None]) -> int:
    """Bytes of traced memory that a third run of ``calls`` leaves behind over the second (the
    first warms caches and interned objects)."""
    calls()
    tracemalloc.start()
    try:
        calls()
        before = tracemalloc.get_traced_memory()[0]
        calls()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_no_memory_is_leaked() -> None:
    """Heap buffers (long texts) and result objects are released: repeated calls keep the
    traced memory flat."""
    long_text = "The answer is <answer> Paris </answer>. " * 50
    subclass_text = type("Text", (str,), {})(long_text)  # passed on to the Python reference

    def calls() -> None:
        for _ in range(2000):
            _speedups.normalize_squad(long_text, False)
            _speedups.scan_tags(long_text, "answer", False)
            _speedups.normalize_squad(subclass_text, True)
            _speedups.scan_tags(subclass_text, "answer", True)

    assert memory_growth(calls) < 10_000


# ------------------------------------------------------------ inputs that are not exact str

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]

_CHILD_PRELUDE = '''
import sys
from reward_plugins import _speedups
from reward_plugins.extract import scan_tags_python
from reward_plugins.text.normalize import normalize_squad_python


def outcome(function, *args):
    try:
        value = function(*args)
    except Exception as error:
        return ("raises", type(error).__name__)
    return ("returns", type(value).__name__, value)


def compare(name, compiled, reference, make_args):
    print("case", name, flush=True)  # names the case if the C code crashes
    got, expected = outcome(compiled, *make_args()), outcome(reference, *make_args())
    if got != expected:
        print("MISMATCH", name, ascii(got)[:300], ascii(expected)[:300], flush=True)


class Lowering(str):
    """A str whose lower() returns what the case says."""

    result = None

    def lower(self):
        return self.result(self)


def lowering(text, result):
    return type("L", (Lowering,), {"result": staticmethod(result)})(text)
'''

_NORMALIZE_CASES = '''
class Odd(str):
    """Every method the C code could be fooled by, overridden."""

    def __len__(self):
        return 10**6

    def __getitem__(self, index):
        return "x" * 1000

    def __iter__(self):
        return iter(["zz"] * 1000)

    def split(self, *args):
        return ["zz"]

    def lower(self):
        return self


class Boom:
    def __bool__(self):
        raise ValueError("no truth value")


class Duck:
    def lower(self):
        return "the duck!"


def raise_value_error(text):
    raise ValueError("lower() failed")


TEXTS = ["The Cat!", "A-n the. b", "\\U0001f600 The \\u4e2d, X", "x" * 300 + " The " * 100]
CASES = [
    ("subclass result", lambda t: lowering(t, lambda s: Lowering(str.lower(s)))),
    ("longer result", lambda t: lowering(t, lambda s: type(s)(str.lower(s) * 1000))),
    ("shorter result", lambda t: lowering(t, lambda s: "")),
    ("other str", lambda t: lowering(t, lambda s: "THE A, Dog" * 50)),
    ("wide result", lambda t: lowering(t, lambda s: "\\U0001f600 the" * 200)),
    ("self", lambda t: lowering(t, lambda s: s)),
    ("bytes", lambda t: lowering(t, lambda s: str.lower(s).encode())),
    ("bytearray", lambda t: lowering(t, lambda s: bytearray(b"the x" * 10000))),
    ("int", lambda t: lowering(t, lambda s: 12345)),
    ("none", lambda t: lowering(t, lambda s: None)),
    ("list", lambda t: lowering(t, lambda s: ["x" * 100000])),
    ("raises", lambda t: lowering(t, raise_value_error)),
    ("odd methods", Odd),
    ("plain subclass", Lowering),
]
for text in TEXTS:
    for name, make in CASES:
        if name == "plain subclass":
            make = lambda t: type("P", (str,), {})(t)
        for spaced in (False, True):
            compare(
                f"normalize {name} {spaced} {text[:12]!a}",
                _speedups.normalize_squad,
                normalize_squad_python,
                lambda: (make(text), spaced),
            )
for name, args in [
    ("none text", lambda: (None, False)),
    ("bytes text", lambda: (b"The Cat", False)),
    ("duck text", lambda: (Duck(), True)),
    ("int text", lambda: (7, False)),
    ("raising flag", lambda: ("The Cat", Boom())),
    ("int flag", lambda: ("The-Cat", 2)),
]:
    compare(f"normalize {name}", _speedups.normalize_squad, normalize_squad_python, args)
print("done", flush=True)
'''

_SCAN_CASES = """
class Finder(str):
    def rfind(self, *args):
        return 0

    def find(self, *args):
        return 0


class Slicer(str):
    def __getitem__(self, index):
        return Slicer("  sliced  ")

    def strip(self, *args):
        return "stripped"


class Formatted(str):
    def __format__(self, spec):
        return "think"

    def translate(self, table):
        return "think"


class Boom:
    def __bool__(self):
        raise ValueError("no truth value")


TEXTS = [
    "<answer> Paris </answer>",
    "<think>x</think><answer>a<answer>b</answer> <answer>c</answer>",
    "<answer>\\U0001f600</answer>" * 40 + "<answer>open",
    "no tags at all",
]
for text in TEXTS:
    for first in (False, True):
        for name, args in [
            ("finder text", lambda: (Finder(text), "answer", first)),
            ("slicer text", lambda: (Slicer(text), "answer", first)),
            ("plain subclass text", lambda: (type("P", (str,), {})(text), "answer", first)),
            ("formatted tag", lambda: (text, Formatted("answer"), first)),
            ("subclass tag", lambda: (text, Slicer("answer"), first)),
            ("bytes tag", lambda: (text, b"answer", first)),
            ("raising flag", lambda: (text, "answer", Boom())),
            ("int flag", lambda: (text, "answer", 1)),
        ]:
            label = f"scan {name} {first} {text[:12]!a}"
            compare(label, _speedups.scan_tags, scan_tags_python, args)
for name, args in [
    ("none text", lambda: (None, "answer", False)),
    ("bytes text", lambda: (b"<answer>x</answer>", "answer", False)),
    ("none tag", lambda: ("<answer>x</answer>", None, False)),
]:
    compare(f"scan {name}", _speedups.scan_tags, scan_tags_python, args)
print("done", flush=True)
"""

_PUBLIC_CASES = """
from reward_plugins.plugins.search_r1 import em_check, normalize_answer
from reward_plugins.text import normalize_squad
from reward_plugins.text.normalize import normalize_squad_spaced


def em_reference(prediction, gold):
    return int(normalize_squad_python(prediction) == normalize_squad_python(gold))


for name, result in [
    ("bytes", lambda s: b"paris"),
    ("bytearray", lambda s: bytearray(b"paris" * 10000)),
    ("int", lambda s: 7),
    ("longer subclass", lambda s: type(s)(str.lower(s) * 500)),
]:
    make = lambda: lowering("The Paris!", result)
    compare(f"normalize_answer {name}", normalize_answer, normalize_squad_python, lambda: (make(),))
    compare(f"normalize_squad {name}", normalize_squad, normalize_squad_python, lambda: (make(),))
    compare(
        f"normalize_squad_spaced {name}",
        normalize_squad_spaced,
        lambda text: normalize_squad_python(text, True),
        lambda: (make(),),
    )
    compare(f"em_check {name}", em_check, em_reference, lambda: (make(), "paris"))
    compare(f"em_check gold {name}", em_check, em_reference, lambda: ("paris", make()))
print("done", flush=True)
"""


def _run_child(cases: str) -> list[str]:
    """Run the comparisons in a child process; fail with the case that crashed, if one did."""
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD_PRELUDE + cases],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        cwd=REPOSITORY_ROOT,
        timeout=300,
    )
    lines = completed.stdout.splitlines()
    last_case = next((line for line in reversed(lines) if line.startswith("case ")), None)
    assert completed.returncode == 0, (
        f"child exited with {completed.returncode} during {last_case!r}: {completed.stderr[-2000:]}"
    )
    assert lines and lines[-1] == "done", completed.stderr[-2000:]
    return [line for line in lines if line.startswith("MISMATCH")]


def test_normalize_squad_on_str_subclasses_and_other_types_matches_python() -> None:
    """A str subclass whose ``lower()`` returns a subclass, a longer or shorter string, bytes, an
    int, None...: the C twin gives the Python reference's value or exception type, and never
    reads memory it does not own (which showed as garbage text or a crash)."""
    assert _run_child(_NORMALIZE_CASES) == []


def test_scan_tags_on_str_subclasses_and_other_types_matches_python() -> None:
    """A text or tag that is a str subclass with overridden methods, a bytes tag, a ``first``
    flag that is not a bool: the C twin gives the Python reference's value or exception type."""
    assert _run_child(_SCAN_CASES) == []


def test_public_normalizers_on_str_subclasses_match_python() -> None:
    """Through ``normalize_answer``, ``em_check`` and the named normalizers too."""
    assert _run_child(_PUBLIC_CASES) == []


def test_the_twins_return_exact_str_for_subclass_input() -> None:
    class Text(str):
        pass

    normalized = _speedups.normalize_squad(Text("The Cat!"), False)
    assert normalized == "cat"
    assert type(normalized) is str
    content, opening, closing = _speedups.scan_tags(Text("<answer> a </answer>"), "answer", True)
    assert (content, opening, closing) == ("a", 1, 1)
    assert type(content) is str


# ------------------------------------------------------------------------- n-gram matches
# ngram_matches(predicted, gold, max_order) -> (predicted n-grams, gold n-grams, clipped matches)
# per order 1..max_order, flat. The C twin reads two str (characters) or two lists of str
# (tokens); ngram_matches_python is its reference, and a Counter oracle checks that one too.

NGRAM_CHARACTERS = ["a", "b", "é", "\u4e2d", "\u4e2e", "\U0001f600", "\U0001f601", "\ud800", " "]
"""1-, 2- and 4-byte characters (neighbours in each width), a lone surrogate, a space."""
NGRAM_TOKENS = ["a", "b", "ab", "ba", "", "é", "\u4e2d", "\U0001f600", "a\U0001f600", "the"]


def counted_matches(predicted: Sequence, gold: Sequence, max_order: int) -> tuple[int, ...]:
    """The definition, with Counter: per order, both n-gram totals and the clipped matches."""
    statistics: list[int] = []
    for order in range(1, max_order + 1):
        mine = Counter(tuple(predicted[i : i + order]) for i in range(len(predicted) - order + 1))
        theirs = Counter(tuple(gold[i : i + order]) for i in range(len(gold) - order + 1))
        statistics += (mine.total(), theirs.total(), (mine & theirs).total())
    return tuple(statistics)


def copied(tokens: list[str]) -> list[str]:
    """Equal tokens as distinct objects (the C code must compare contents, not identities);
    one-character Latin-1 strings stay the interpreter's shared ones."""
    return [
        token.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass") for token in tokens
    ]


character_texts = st.one_of(
    st.text(st.sampled_from(NGRAM_CHARACTERS[:2]), max_size=40),  # many repeats
    st.text(st.sampled_from(NGRAM_CHARACTERS), max_size=40),
    st.text(max_size=40),  # large alphabets
)
token_lists = st.one_of(
    st.lists(st.sampled_from(NGRAM_TOKENS[:2]), max_size=30),
    st.lists(st.sampled_from(NGRAM_TOKENS), max_size=30),
    st.lists(st.text(max_size=3), max_size=30),
).map(copied)
orders = st.integers(0, 10)


def test_the_metrics_use_the_ngram_matcher() -> None:
    assert ngrams_module.ngram_matches is _speedups.ngram_matches
    assert rouge_module.ngram_matches is _speedups.ngram_matches
    assert rouge_module.compiled_ngram_matches is _speedups.ngram_matches
    assert chrf_module.compiled_ngram_matches is _speedups.ngram_matches


@pytest.mark.parametrize(
    ("predicted", "gold", "max_order", "expected"),
    [
        ("abcab", "abab", 3, (5, 4, 4, 4, 3, 2, 3, 2, 0)),
        ("aaaa", "aa", 3, (4, 2, 2, 3, 1, 1, 2, 0, 0)),  # clipped at the gold count
        ("", "", 2, (0, 0, 0, 0, 0, 0)),
        ("ab", "", 1, (2, 0, 0)),
        ("ab", "ab", 0, ()),
        (["x", "y"], ["y", "x", "y"], 3, (2, 3, 2, 1, 2, 1, 0, 1, 0)),
        ([], ["a"], 2, (0, 1, 0, 0, 0, 0)),
    ],
)
def test_ngram_matches_by_hand(
    predicted: Sequence, gold: Sequence, max_order: int, expected: tuple
) -> None:
    assert _speedups.ngram_matches(predicted, gold, max_order) == expected
    assert ngram_matches_python(predicted, gold, max_order) == expected


@settings(max_examples=2000, deadline=None)
@given(character_texts, character_texts, orders)
def test_ngram_matches_on_characters_matches_python(
    predicted: str, gold: str, max_order: int
) -> None:
    got = _speedups.ngram_matches(predicted, gold, max_order)
    assert got == ngram_matches_python(predicted, gold, max_order)
    assert got == counted_matches(predicted, gold, max_order)
    assert type(got) is tuple and all(type(value) is int for value in got)


@settings(max_examples=2000, deadline=None)
@given(token_lists, token_lists, orders)
def test_ngram_matches_on_tokens_matches_python(
    predicted: list[str], gold: list[str], max_order: int
) -> None:
    got = _speedups.ngram_matches(predicted, gold, max_order)
    assert got == ngram_matches_python(predicted, gold, max_order)
    assert got == counted_matches(predicted, gold, max_order)


@pytest.mark.parametrize("wide", ["", "é", "\u4e2d", "\U0001f600"])
@pytest.mark.parametrize(
    ("predicted_length", "gold_length"), [(128, 128), (128, 129), (3000, 2000)]
)
def test_ngram_matches_beyond_the_stack_buffer(
    wide: str, predicted_length: int, gold_length: int
) -> None:
    """Two texts of 256 items in all fit the C stack buffer, 257 do not; all-equal items, a
    small alphabet, and an alphabet as large as the text."""
    rng = random.Random(predicted_length + gold_length)
    alphabets = ["a", "ab" + wide, [chr(0x4E00 + i) for i in range(6000)] + [wide or "z"]]
    for alphabet in alphabets:
        predicted = "".join(rng.choices(alphabet, k=predicted_length))
        gold = "".join(rng.choices(alphabet, k=gold_length))
        for max_order in (1, 4, 10):
            expected = ngram_matches_python(predicted, gold, max_order)
            assert _speedups.ngram_matches(predicted, gold, max_order) == expected
            tokens = copied(list(predicted)), copied(list(gold))
            assert _speedups.ngram_matches(*tokens, max_order) == expected
        assert _speedups.ngram_matches(predicted, predicted, 3)[2::3] == tuple(
            max(predicted_length - order + 1, 0) for order in (1, 2, 3)
        )


def test_ngram_matches_orders_beyond_the_lengths() -> None:
    assert _speedups.ngram_matches("ab", "abc", 5) == (2, 3, 2, 1, 2, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0)
    assert _speedups.ngram_matches("ab", "cd", 400) == (2, 2, 0, 1, 1, 0) + (0,) * 1194


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=30), st.lists(st.text(max_size=30), min_size=1, max_size=3), st.integers(0, 2)
)
def test_chrf_counts_the_same_with_and_without_the_extension(
    prediction: str, targets: list[str], word_order: int
) -> None:
    """The compiled pair-by-pair statistics equal the numpy / Counter path's, every order."""
    metric = Chrf(char_order=max(1, 6 - word_order), word_order=word_order)
    compiled = metric._candidate_statistics(prediction, tuple(targets))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chrf_module, "compiled_ngram_matches", None)
        assert metric._candidate_statistics(prediction, tuple(targets)) == compiled


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=40), st.lists(st.text(max_size=40), min_size=1, max_size=3), st.integers(1, 5)
)
def test_rouge_n_scores_the_same_with_and_without_the_extension(
    prediction: str, targets: list[str], n: int
) -> None:
    metrics = [RougeN(n=n, measure=measure) for measure in "prf"]
    compiled = [metric(prediction, targets) for metric in metrics]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rouge_module, "compiled_ngram_matches", None)
        assert [metric(prediction, targets) for metric in metrics] == compiled


def test_ngram_matches_wrong_argument_count_names_the_function() -> None:
    with pytest.raises(TypeError, match="ngram_matches"):
        _speedups.ngram_matches("ab", "ab")  # type: ignore[call-arg]


def test_ngram_matches_leaks_no_memory() -> None:
    """Heap blocks (long texts), result tuples and the calls passed on to the reference are
    released: repeated calls keep the traced memory flat."""
    long_text = "the cat sat on the mat " * 40
    tokens = long_text.split()

    def calls() -> None:
        for _ in range(300):
            _speedups.ngram_matches(long_text, long_text[::-1], 6)
            _speedups.ngram_matches(tokens, tokens[::-1], 4)
            _speedups.ngram_matches("ab", "ba", 2)
            _speedups.ngram_matches(tuple(tokens[:5]), tokens[:5], 2)  # the reference
            _speedups.ngram_matches([*tokens[:5], 1], tokens[:5], 2)  # the reference too

    assert memory_growth(calls) < 10_000


_NGRAM_CASES = """
from reward_plugins.metrics.ngrams import ngram_matches_python


class Loose(str):
    '''Equal to every string, with one hash: the reference then matches everything.'''

    def __eq__(self, other):
        return True

    def __hash__(self):
        return 1


class Unequal(str):
    def __eq__(self, other):
        return False

    def __hash__(self):
        return 2


class Measured(list):
    def __len__(self):
        return 10**6

    def __getitem__(self, index):
        return ["zz"] * 3 if isinstance(index, slice) else "zz"


class Shouting(str):
    def __getitem__(self, index):
        return "X"

    def __iter__(self):
        return iter("XYZ")

    def __len__(self):
        return 3


class Boom:
    def __index__(self):
        raise ValueError("no index")


class Mutating(str):
    '''Empties the list it is in when hashed (so when the reference counts it).'''

    victim = None

    def __hash__(self):
        if Mutating.victim is not None:
            Mutating.victim.clear()
        return 3


def mutating_case():
    tokens = ["a", "b", Mutating("c"), "d"]
    Mutating.victim = tokens
    return (tokens, ["a", "b", "c"], 2)


TOKENS = ["the", "cat", "\\U0001f600", "é", "the"]
CASES = [
    ("int item", lambda: ([*TOKENS, 1], TOKENS, 2)),
    ("int item in gold", lambda: (TOKENS, [1, *TOKENS], 3)),
    ("none item", lambda: ([None, "a"], ["a"], 1)),
    ("bytes item", lambda: ([b"a", "a"], ["a"], 2)),
    ("unhashable item", lambda: ([["a"], "a"], ["a"], 1)),
    ("unhashable item late", lambda: (["a"] * 300 + [["a"]], ["a"], 1)),
    ("loose subclass item", lambda: ([Loose("q"), "a"], ["a", "b"], 2)),
    ("unequal subclass item", lambda: ([Unequal("a"), "a"], ["a", "a"], 1)),
    ("mutating item", mutating_case),
    ("tuples", lambda: (tuple(TOKENS), tuple(TOKENS), 2)),
    ("tuple and list", lambda: (tuple(TOKENS), TOKENS, 2)),
    ("str and list", lambda: ("thecat", TOKENS, 2)),
    ("list subclass", lambda: (Measured(TOKENS), TOKENS, 2)),
    ("str subclass", lambda: (Shouting("abc"), "XYZ", 2)),
    ("str subclass gold", lambda: ("XYZ", Shouting("abc"), 3)),
    ("bytes", lambda: (b"abc", b"abd", 2)),
    ("none", lambda: (None, "abc", 1)),
    ("ints", lambda: (5, 6, 1)),
    ("order bool", lambda: ("aab", "ab", True)),
    ("order float", lambda: ("aab", "ab", 2.0)),
    ("order str", lambda: ("aab", "ab", "2")),
    ("order none", lambda: ("aab", "ab", None)),
    ("order negative", lambda: ("aab", "ab", -3)),
    ("order index", lambda: ("aab", "ab", Boom())),
    ("order zero", lambda: (TOKENS, TOKENS, 0)),
]
for name, args in CASES:
    compare(f"ngram_matches {name}", _speedups.ngram_matches, ngram_matches_python, args)
print("done", flush=True)
"""


def test_ngram_matches_on_other_types_matches_python() -> None:
    """Lists holding a non-str, a str subclass with its own ``__eq__``/``__hash__`` or one that
    empties its list when hashed, tuples, list and str subclasses, orders that are not an int
    >= 0: the C twin gives the Python reference's value or exception type, and does not crash."""
    assert _run_child(_NGRAM_CASES) == []
