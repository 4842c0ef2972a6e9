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
import string
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins.extract import scan_tags_python
from reward_plugins.text.normalize import normalize_squad_python

if importlib.util.find_spec("reward_plugins._speedups") is None:
    # CI builds the package with a compiler, so there a missing extension is a failure.
    if os.environ.get("CI") == "true":
        raise AssertionError("reward_plugins._speedups was not built (CI=true needs it)")
    pytest.skip("the C extension is not built here", allow_module_level=True)

from reward_plugins import _speedups
from reward_plugins.extract import _scan_tags
from reward_plugins.text.normalize import _normalize_squad

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

    calls()
    tracemalloc.start()
    try:
        calls()
        before = tracemalloc.get_traced_memory()[0]
        calls()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 10_000


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
