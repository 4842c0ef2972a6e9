"""Differential parity of the Search-R1 plugin and routers with verl 0.9.1's reference module.

The reference is the installed ``verl.utils.reward_score.search_r1_like_qa_em`` (its random
``print`` calls are silenced with ``contextlib.redirect_stdout``). With default options every
verl-compatible function must return the same value *and* type as verl's function of the same
name, and the routers must return ``float(verl value)`` as their ``score``.
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from verl.utils.reward_score import search_r1_like_qa_em as verl_qa

import reward_plugins
from reward_plugins.plugins import search_r1
from reward_plugins.plugins.search_r1 import SEARCH_R1_DATA_SOURCES

# ------------------------------------------------------------------------------ generator

GOLD_SETS: tuple[tuple[str, ...], ...] = (
    ("Paris",),
    ("Paris", "paris city"),
    ("the Eiffel Tower",),
    ("U.S.A.", "United States"),
    ("New York City", "NYC"),
    ("1990",),
    ("yes",),
    ("no",),
    ("a",),
    ("the",),
    ("an apple",),
    ("O'Neil",),
    ("Pelé",),
    ("北京",),
    ("İstanbul",),
    ("Straße",),
    ("\uff30\uff41\uff52\uff49\uff53",),  # full-width "Paris"
    ("don't-stop", "Don't Stop"),
    ("",),  # empty gold: normalizes to "", SubEM matches every answer
    ("", "x"),
    ("...", "!?"),  # punctuation-only golds normalize to ""
    (),  # empty target list: never matches
    ("\u00a0Paris\u3000",),
    ("two\u200bwords",),
)

# Ways a policy writes (or miswrites) an answer from a gold string g.
ANSWER_FORMS: tuple[Callable[[str], str], ...] = (
    lambda g: g,
    lambda g: g,
    lambda g: g.upper(),
    lambda g: g.swapcase(),
    lambda g: f"{g}.",
    lambda g: f'"{g}"',
    lambda g: f"The {g}",
    lambda g: f"a {g}!",
    lambda g: f"  {g}  ",
    lambda g: f"\u00a0 {g} \u3000",
    lambda g: f"\u200b{g}",
    lambda g: f"\x1c{g}\x1c",
    lambda g: f"{g}\n{g}",
    lambda g: f"It is {g}, London, Berlin",
    lambda g: g[:-1],
    lambda g: f"{g}ian",
    lambda g: "London",
    lambda g: "I do not know",
    lambda g: "",
    lambda g: "   ",
    lambda g: "?!",
    lambda g: "the",
    lambda g: "北京。",
)

FILLERS: tuple[str, ...] = (
    "I need to search for this.",
    "Let me think step by step about the question",
    "Doc 1 (Title: Paris) Paris is the capital of France.",
    "who is the mayor",
    "  \n\t ",
    "résumé naïve café — “quoted” \u2018single\u2019",
    "数据 检索 北京是中国的首都。",
    "\u00a0\u3000\u200b\x1c\x1d\x1e\x1f\x85",
    '<tool_call>{"name": "search"}</tool_call>',
    "a < b > c </ answer> <answer",
    "",
)

WHITESPACE = ("\n", " ", "\u00a0", "\u3000", "\u200b", "\x1c", "\t\r\n", "\n\n")

# Segment templates: {a} the rollout's answer, {b} a second answer, {f} filler, {g} a gold,
# {w} odd whitespace.
SEGMENTS: tuple[str, ...] = (
    "<think>{f}</think>",
    "<search>{f}</search>",
    "<information>{f} {g}</information>",
    "<answer>{a}</answer>",
    "<answer>{a}",  # unclosed opener
    "{a}</answer>",  # stray closer
    "<answer>{b}<answer>{a}</answer>",  # nested: span is "{b}<answer>{a}"
    "<Answer>{a}</Answer>",  # tags are case-sensitive
    "<answer >{a}</ answer>",  # not tags at all
    "{w}",
    "<information><answer>{g}</answer></information>",  # tags inside retrieved text
    "<answer></answer>",
    "<answer>\n{a}\n</answer>",
    "<answer>{a}</answer>{w}<answer>{b}</answer>",  # repeated, last wins
    "{f}",
)
SEGMENT_WEIGHTS = np.array([6, 4, 4, 10, 2, 2, 2, 1, 1, 3, 2, 1, 2, 2, 3], dtype=float)

SPAM_TAILS: tuple[str, ...] = (
    "<answer>{a}</answer>",  # k complete pairs
    "<answer>",  # k extra openers
    "</answer>",  # k extra closers
)


class Rollout:
    """One generated row: a response, its data source and its (shared) ground-truth dict."""

    __slots__ = ("answer", "data_source", "ground_truth", "response")

    def __init__(self, data_source: str, response: str, ground_truth: dict, answer: str) -> None:
        self.data_source = data_source
        self.response = response
        self.ground_truth = ground_truth
        self.answer = answer


def _container(golds: tuple[str, ...], kind: int) -> Any:
    """The gold list in one of the shapes verl datasets produce."""
    if kind == 0:
        return list(golds)
    if kind == 1:
        return tuple(golds)
    if kind == 2:
        return np.array(golds, dtype=object)
    if kind == 3:
        return np.array(golds, dtype=str)  # numpy <U array
    if len(golds) != 1:
        return list(golds)
    return golds[0] if kind == 4 else np.str_(golds[0])


def generate_rollouts(count: int, seed: int, group_size: int = 8) -> list[Rollout]:
    """Seeded Search-R1-style rollouts; each GRPO group of ``group_size`` shares one ground truth.

    All random draws are made up front with numpy; the loop only assembles strings.
    """
    rng = np.random.default_rng(seed)
    groups = -(-count // group_size)
    gold_set = rng.integers(len(GOLD_SETS), size=groups)
    container = rng.integers(6, size=groups)
    source = rng.integers(len(SEARCH_R1_DATA_SOURCES), size=groups)
    segment_count = rng.integers(0, 9, size=count)
    segment_kind = rng.choice(
        len(SEGMENTS), size=int(segment_count.sum()), p=SEGMENT_WEIGHTS / SEGMENT_WEIGHTS.sum()
    )
    filler = rng.integers(len(FILLERS), size=segment_kind.size)
    space = rng.integers(len(WHITESPACE), size=segment_kind.size)
    form_a = rng.integers(len(ANSWER_FORMS), size=count)
    form_b = rng.integers(len(ANSWER_FORMS), size=count)
    gold_pick = rng.integers(0, 1 << 30, size=count)
    spam_mode = rng.integers(0, 10, size=count)  # 0..2 add a spam tail, otherwise none
    spam_count = rng.integers(9, 13, size=count)  # around the "> 10" threshold

    rollouts: list[Rollout] = []
    position = 0
    ground_truth: dict = {}
    for i in range(count):
        group = i // group_size
        golds = GOLD_SETS[gold_set[group]]
        if i % group_size == 0:
            ground_truth = {"target": _container(golds, int(container[group]))}
        gold = golds[gold_pick[i] % len(golds)] if golds else "Paris"
        answer = ANSWER_FORMS[form_a[i]](gold)
        other = ANSWER_FORMS[form_b[i]](gold)
        parts = []
        for j in range(position, position + int(segment_count[i])):
            parts.append(
                SEGMENTS[segment_kind[j]].format(
                    a=answer, b=other, f=FILLERS[filler[j]], g=gold, w=WHITESPACE[space[j]]
                )
            )
        position += int(segment_count[i])
        if spam_mode[i] < len(SPAM_TAILS):
            parts.append(SPAM_TAILS[spam_mode[i]].format(a=answer) * int(spam_count[i]))
            if spam_mode[i] > 0:  # keep the answer after extra openers/closers
                parts.append(f"<answer>{answer}</answer>")
        response = "".join(parts)
        source_name = SEARCH_R1_DATA_SOURCES[source[group]]
        rollouts.append(Rollout(source_name, response, ground_truth, answer))
    return rollouts


def _same(ours: Any, reference: Any) -> bool:
    """Equal value and identical type (``0`` is not ``0.0``)."""
    return type(ours) is type(reference) and ours == reference


ROLLOUT_COUNT = 50_000


@pytest.fixture(scope="module")
def rollouts() -> list[Rollout]:
    return generate_rollouts(ROLLOUT_COUNT, seed=20250531)


def test_generator_covers_every_branch(rollouts: list[Rollout]) -> None:
    """The generated set must exercise every row of verl's decision tables, many times each."""
    em_values: Counter[tuple[type, Any]] = Counter()
    subem_only = 0
    tag_counts: Counter[int] = Counter()
    containers: Counter[str] = Counter()
    with contextlib.redirect_stdout(io.StringIO()):
        for rollout in rollouts:
            reference = verl_qa.compute_score(rollout.response, rollout.ground_truth)
            em_values[type(reference), reference] += 1
            subem = verl_qa.compute_score_subem(rollout.response, rollout.ground_truth)
            subem_only += subem == 1.0 and reference == 0.0
            tag_counts[max(verl_qa.count_answer_tags(rollout.response))] += 1
            containers[type(rollout.ground_truth["target"]).__name__] += 1
    assert em_values[int, 0] > 1000  # no answer
    assert em_values[float, 0.0] > 1000  # wrong answer
    assert em_values[float, 1.0] > 1000  # correct
    assert em_values[float, 0.25] > 200  # correct but spammed
    assert subem_only > 500  # SubEM-only matches
    for tags in (9, 10, 11, 12):
        assert tag_counts[tags] > 200, tags
    assert set(containers) == {"list", "tuple", "ndarray", "str", "str_"}


def test_verl_compatible_functions_match_verl(rollouts: list[Rollout]) -> None:
    """compute_score, compute_score_subem, extract_solution, count_answer_tags: value and type."""
    mismatches: list[tuple[str, str, Any, Any]] = []
    with contextlib.redirect_stdout(io.StringIO()):
        for rollout in rollouts:
            response, ground_truth = rollout.response, rollout.ground_truth
            for name, ours, reference in (
                (
                    "compute_score",
                    search_r1.compute_score(response, ground_truth),
                    verl_qa.compute_score(response, ground_truth),
                ),
                (
                    "compute_score_subem",
                    search_r1.compute_score_subem(response, ground_truth),
                    verl_qa.compute_score_subem(response, ground_truth),
                ),
                (
                    "extract_solution",
                    search_r1.extract_solution(response),
                    verl_qa.extract_solution(response),
                ),
                (
                    "count_answer_tags",
                    search_r1.count_answer_tags(response),
                    verl_qa.count_answer_tags(response),
                ),
            ):
                if not _same(ours, reference):
                    mismatches.append((name, response, ours, reference))
    assert mismatches == []


def test_explicit_default_options_match_verl(rollouts: list[Rollout]) -> None:
    """The defaults spelled out are an option set of their own (checked and bound separately
    from the empty one); they must give verl's value and type too."""
    defaults = {"extract": "last", "max_answer_tags": 10, "spam_factor": 0.25}
    mismatches = []
    with contextlib.redirect_stdout(io.StringIO()):
        for rollout in rollouts[:20_000]:
            response, ground_truth = rollout.response, rollout.ground_truth
            for ours, reference in (
                (
                    search_r1.compute_score(response, ground_truth, **defaults),
                    verl_qa.compute_score(response, ground_truth),
                ),
                (
                    search_r1.compute_score_subem(response, ground_truth, **defaults),
                    verl_qa.compute_score_subem(response, ground_truth),
                ),
            ):
                if not _same(ours, reference):
                    mismatches.append((response, ours, reference))
    assert mismatches == []


def test_no_options_and_spelled_out_defaults_agree_on_every_key(rollouts: list[Rollout]) -> None:
    """The router scorers and ``compute_score_f1`` without options and with the defaults spelled
    out (two bound option sets): same dicts (values and types), same F1 rewards; ``f1`` is not
    zero on a few thousand rows, so the F1 branch is exercised."""
    defaults = {"extract": "last", "max_answer_tags": 10, "spam_factor": 0.25}
    mismatches = []
    partial_f1 = 0
    for rollout in rollouts[:20_000]:
        response, ground_truth = rollout.response, rollout.ground_truth
        for router in (
            reward_plugins.compute_score,
            reward_plugins.compute_score_subem,
            reward_plugins.compute_score_f1,
        ):
            lean = router(rollout.data_source, response, ground_truth)
            general = router(rollout.data_source, response, ground_truth, **defaults)
            if lean != general or list(map(type, lean.values())) != list(
                map(type, general.values())
            ):
                mismatches.append((router.__name__, response, lean, general))
        lean_f1 = search_r1.compute_score_f1(response, ground_truth)
        if not _same(lean_f1, search_r1.compute_score_f1(response, ground_truth, **defaults)):
            mismatches.append(("compute_score_f1", response, lean_f1, None))
        partial_f1 += 0 < lean_f1 < 1
    assert mismatches == []
    assert partial_f1 > 1000


def test_text_checks_match_verl(rollouts: list[Rollout]) -> None:
    """normalize_answer, em_check and subem_check on answers and every gold container shape."""
    mismatches: list[tuple[str, Any, Any, Any, Any]] = []
    for rollout in rollouts[::2]:
        target = rollout.ground_truth["target"]
        for name, ours, reference in (
            ("em_check", search_r1.em_check, verl_qa.em_check),
            ("subem_check", search_r1.subem_check, verl_qa.subem_check),
        ):
            got, expected = ours(rollout.answer, target), reference(rollout.answer, target)
            if not _same(got, expected):
                mismatches.append((name, rollout.answer, target, got, expected))
        for text in (rollout.answer, rollout.response[:200]):
            got, expected = search_r1.normalize_answer(text), verl_qa.normalize_answer(text)
            if not _same(got, expected):
                mismatches.append(("normalize_answer", text, None, got, expected))
    assert mismatches == []


def test_routers_return_float_of_verl_value(rollouts: list[Rollout]) -> None:
    """The routers' ``score`` (and ``return_dict=False`` value) is ``float(verl value)``."""
    mismatches: list[tuple[str, str, Any, Any]] = []
    with contextlib.redirect_stdout(io.StringIO()):
        for index, rollout in enumerate(rollouts):
            source, response, truth = rollout.data_source, rollout.response, rollout.ground_truth
            expected_em = float(verl_qa.compute_score(response, truth))
            expected_subem = float(verl_qa.compute_score_subem(response, truth))
            em = reward_plugins.compute_score(source, response, truth)["score"]
            subem = reward_plugins.compute_score_subem(source, response, truth, {})["score"]
            if not (_same(em, expected_em) and _same(subem, expected_subem)):
                mismatches.append((source, response, (em, subem), (expected_em, expected_subem)))
            if index % 5 == 0:
                plain = reward_plugins.compute_score(source, response, truth, return_dict=False)
                if not _same(plain, expected_em):
                    mismatches.append((source, response, plain, expected_em))
    assert mismatches == []


# ---------------------------------------------------------------------- hand-picked edge cases

PARIS = ["Paris"]

# (id, scorer, response, target, options, expected): each row is checked against verl's function
# of the same name and against the literal; ``expected`` must match in value and type.
EDGE_CASES: list[tuple[str, str, str, Any, dict[str, Any], Any]] = [
    # plain correct answer
    ("correct", "em", "<answer>Paris</answer>", PARIS, {}, 1.0),
    # no tags at all: the int 0, not format_score
    ("no-answer-int-zero", "em", "I think it is Paris.", PARIS, {}, 0),
    # no answer still gives 0 when format_score is set
    ("no-answer-ignores-format-score", "em", "Paris", PARIS, {"format_score": 0.1}, 0),
    # an opener without a closer is no match
    ("unclosed-opener", "em", "<answer>Paris", PARIS, {}, 0),
    # a closer without an opener is no match
    ("stray-closer", "em", "Paris</answer>", PARIS, {}, 0),
    # wrong answer: format_score (0.0, a float)
    ("wrong", "em", "<answer>London</answer>", PARIS, {}, 0.0),
    # nested: the first opener pairs with the first closer, span "a<answer>Paris"
    ("nested-span-wrong", "em", "<answer>a<answer>Paris</answer>", PARIS, {}, 0.0),
    # ... and that span normalizes to "aanswerparis"
    ("nested-span-content", "em", "<answer>a<answer>Paris</answer>", ["aanswerparis"], {}, 1.0),
    # last match is "b<answer>Paris", not the naive "Paris"
    (
        "last-match-not-naive",
        "em",
        "<answer>a</answer><answer>b<answer>Paris</answer>",
        PARIS,
        {},
        0.0,
    ),
    # the last complete span wins
    ("last-wins", "em", "<answer>Paris</answer> <answer>London</answer>", PARIS, {}, 0.0),
    # a trailing unclosed opener does not hide the last complete span
    ("trailing-unclosed", "em", "<answer>Paris</answer><answer>London", PARIS, {}, 1.0),
    # tags are case-sensitive
    ("capitalized-tags", "em", "<Answer>Paris</Answer>", PARIS, {}, 0),
    # DOTALL: the span may contain newlines
    ("multiline-span", "em", "<answer>\nParis\n</answer>", PARIS, {}, 1.0),
    # exactly 10 pairs: not spam (strict "> 10")
    ("ten-pairs", "em", "<answer>Paris</answer>" * 10, PARIS, {}, 1.0),
    # 11 pairs: divided by 4
    ("eleven-pairs", "em", "<answer>Paris</answer>" * 11, PARIS, {}, 0.25),
    # 11 closers, 1 opener: the closing count alone triggers the penalty
    ("eleven-closers", "em", "</answer>" * 10 + "<answer>Paris</answer>", PARIS, {}, 0.25),
    # 11 openers, 1 closer: the opening count alone triggers the penalty
    ("eleven-openers", "em", "<answer>Paris</answer>" + "<answer>" * 10, PARIS, {}, 0.25),
    # 10 openers and 10 closers in odd places: no penalty
    ("ten-each", "em", "<answer>" * 9 + "</answer>" * 9 + "<answer>Paris</answer>", PARIS, {}, 1.0),
    # spam on a wrong answer is not penalized further
    ("spam-wrong", "em", "<answer>London</answer>" * 50, PARIS, {"format_score": 0.1}, 0.1),
    # score=2 with spam: 2 / 4
    ("spam-score-two", "em", "<answer>Paris</answer>" * 11, PARIS, {"score": 2}, 0.5),
    # score is returned as passed: the int 2
    ("score-int-passthrough", "em", "<answer>Paris</answer>", PARIS, {"score": 2}, 2),
    # format_score is returned as passed: the int 0
    ("format-score-int", "em", "<answer>London</answer>", PARIS, {"format_score": 0}, 0),
    # format_score 0.1 on a wrong answer
    ("format-score-float", "em", "<answer>London</answer>", PARIS, {"format_score": 0.1}, 0.1),
    # SubEM has no spam penalty at all
    ("subem-no-penalty", "subem", "<answer>Paris</answer>" * 11, PARIS, {}, 1.0),
    # SubEM enumeration hack
    ("subem-enumeration", "subem", "<answer>It is Paris, London, Berlin</answer>", PARIS, {}, 1.0),
    # SubEM character-substring hack
    ("subem-no-in-know", "subem", "<answer>I do not know</answer>", ["no"], {}, 1.0),
    # no word boundaries in SubEM
    ("subem-parisian", "subem", "<answer>Parisian</answer>", PARIS, {}, 1.0),
    # SubEM without an answer is still the int 0
    ("subem-no-answer", "subem", "no tags", PARIS, {}, 0),
    # empty target list never matches (EM)
    ("empty-golds-em", "em", "<answer>Paris</answer>", [], {}, 0.0),
    # empty target list never matches (SubEM), even an empty answer
    ("empty-golds-subem", "subem", "<answer></answer>", [], {}, 0.0),
    # empty target list and no answer: 0
    ("empty-golds-no-answer", "em", "nothing", [], {}, 0),
    # an empty gold is a substring of every normalized answer
    ("empty-gold-subem", "subem", "<answer>anything</answer>", ["", "x"], {}, 1.0),
    # ... but equals only an answer that normalizes to ""
    ("empty-gold-em", "em", "<answer>anything</answer>", ["", "x"], {}, 0.0),
    # empty span equals an empty gold
    ("empty-span-empty-gold", "em", "<answer></answer>", [""], {}, 1.0),
    # "the" normalizes to "", as does "a"
    ("article-answer", "em", "<answer>the</answer>", ["a"], {}, 1.0),
    # "the" against a real gold is wrong
    ("article-answer-wrong", "em", "<answer>the</answer>", PARIS, {}, 0.0),
    # punctuation-only golds and answers both normalize to ""
    ("punctuation-only", "em", "<answer>?!</answer>", ["..."], {}, 1.0),
    # case, articles, punctuation and whitespace are normalized
    ("normalized", "em", "<answer>  The  PARIS! </answer>", ["paris"], {}, 1.0),
    # punctuation goes before articles: "the-end" -> "theend"
    ("punct-before-articles", "em", "<answer>the-end</answer>", ["end"], {}, 0.0),
    # CJK full stop is not ASCII punctuation
    ("cjk-punctuation", "em", "<answer>北京。</answer>", ["北京"], {}, 0.0),
    # no NFKC folding of full-width letters
    ("full-width", "em", "<answer>\uff30\uff41\uff52\uff49\uff53</answer>", PARIS, {}, 0.0),
    # no accent folding
    ("accent", "em", "<answer>Pelé</answer>", ["Pele"], {}, 0.0),
    # curly apostrophe is not ASCII punctuation
    ("curly-quote", "em", "<answer>O\u2019Neil</answer>", ["O'Neil"], {}, 0.0),
    # no-break and ideographic spaces are stripped
    ("nbsp-ideographic-space", "em", "<answer>\u00a0Paris\u3000</answer>", PARIS, {}, 1.0),
    # zero-width space is not whitespace
    ("zero-width-space", "em", "<answer>\u200bParis</answer>", PARIS, {}, 0.0),
    # \x1c is whitespace for str.strip/str.split
    ("file-separator", "em", "<answer>\x1cParis\x1c</answer>", PARIS, {}, 1.0),
    # a str gold is wrapped
    ("str-gold", "em", "<answer>Paris</answer>", "Paris", {}, 1.0),
    # a numpy str gold is wrapped
    ("np-str-gold", "em", "<answer>Paris</answer>", np.str_("Paris"), {}, 1.0),
    # a numpy object array of golds, second gold matches
    (
        "ndarray-object",
        "em",
        "<answer>Paris city</answer>",
        np.array(["Paris", "paris city"], dtype=object),
        {},
        1.0,
    ),
    # a numpy <U array of golds
    ("ndarray-unicode", "em", "<answer>Paris</answer>", np.array(["Lyon", "Paris"]), {}, 1.0),
    # a tuple of golds
    ("tuple-golds", "subem", "<answer>in Paris</answer>", ("Lyon", "Paris"), {}, 1.0),
    # empty numpy array never matches
    ("empty-ndarray", "subem", "<answer>x</answer>", np.array([], dtype=str), {}, 0.0),
]


def _verl_function(scorer: str) -> Callable[..., Any]:
    return verl_qa.compute_score if scorer == "em" else verl_qa.compute_score_subem


def _our_function(scorer: str) -> Callable[..., Any]:
    return search_r1.compute_score if scorer == "em" else search_r1.compute_score_subem


@pytest.mark.parametrize(
    ("scorer", "response", "target", "options", "expected"),
    [case[1:] for case in EDGE_CASES],
    ids=[case[0] for case in EDGE_CASES],
)
def test_edge_case(
    scorer: str, response: str, target: Any, options: dict[str, Any], expected: Any
) -> None:
    ground_truth = {"target": target}
    with contextlib.redirect_stdout(io.StringIO()):
        reference = _verl_function(scorer)(response, ground_truth, **options)
    assert _same(reference, expected), "the literal disagrees with verl"
    assert _same(_our_function(scorer)(response, ground_truth, **options), expected)
    router = reward_plugins.compute_score if scorer == "em" else reward_plugins.compute_score_subem
    result = router("searchR1_nq", response, ground_truth, **options)
    assert _same(result["score"], float(expected))


@pytest.mark.parametrize(
    ("response", "target"),
    [case[2:4] for case in EDGE_CASES]
    + [("<answer></answer>", [""]), ("<answer>!</answer>", ["?"]), ("<answer>a b</answer>", "b c")],
    ids=[case[0] for case in EDGE_CASES] + ["empty-vs-empty", "punctuation-answer", "partial-f1"],
)
def test_lean_and_general_paths_agree_on_edge_cases(response: str, target: Any) -> None:
    defaults = {"extract": "last", "max_answer_tags": 10}
    ground_truth = {"target": target}
    for router in (
        reward_plugins.compute_score,
        reward_plugins.compute_score_subem,
        reward_plugins.compute_score_f1,
    ):
        lean = router("searchR1_nq", response, ground_truth)
        general = router("searchR1_nq", response, ground_truth, **defaults)
        assert lean == general, router.__name__
        assert list(map(type, lean.values())) == list(map(type, general.values()))
    for function in (search_r1.compute_score, search_r1.compute_score_f1):
        assert _same(function(response, ground_truth), function(response, ground_truth, **defaults))


# (id, response, verl's extract_solution result)
EXTRACTION_CASES: list[tuple[str, str, str | None]] = [
    ("nested", "<answer>a<answer>b</answer>", "a<answer>b"),
    ("last-after-nested", "<answer>a</answer><answer>b<answer>c</answer>", "b<answer>c"),
    ("unclosed", "<answer>a", None),
    ("closer-first", "</answer><answer>a</answer>", "a"),
    ("empty", "<answer></answer>", ""),
    ("whitespace-only", "<answer> \n\t\u3000</answer>", ""),
    ("strip-keeps-zero-width", "<answer>\u200ba\u200b</answer>", "\u200ba\u200b"),
    ("double-closer", "<answer>a</answer></answer>", "a"),
    ("closers-inside", "<answer>a</answer>b</answer><answer>c", "a"),
    ("open-open-close-close", "<answer><answer>x</answer></answer>", "<answer>x"),
    ("no-tags", "plain text", None),
]


@pytest.mark.parametrize(
    ("response", "expected"),
    [case[1:] for case in EXTRACTION_CASES],
    ids=[case[0] for case in EXTRACTION_CASES],
)
def test_extraction_edge_case(response: str, expected: str | None) -> None:
    assert verl_qa.extract_solution(response) == expected
    assert search_r1.extract_solution(response) == expected
    assert search_r1.count_answer_tags(response) == verl_qa.count_answer_tags(response)


def test_positional_call_matches_verl() -> None:
    """verl's positional order ``(solution_str, ground_truth, method, format_score, score)``."""
    truth = {"target": ["Paris"]}
    for response in ("<answer>Paris</answer>", "<answer>x</answer>", "x"):
        for args in (("strict",), ("flexible", 0.3), ("strict", 0.3, 3.0)):
            with contextlib.redirect_stdout(io.StringIO()):
                expected = verl_qa.compute_score(response, truth, *args)
            assert _same(search_r1.compute_score(response, truth, *args), expected)


@pytest.mark.parametrize(
    "score",
    [Fraction(1), Decimal("1"), np.float32(1.0), np.float64(3.0), 2**60 + 3],
    ids=["fraction", "decimal", "float32", "float64", "huge-int"],
)
def test_spam_penalty_keeps_verl_numeric_type(score: Any) -> None:
    """verl divides ``score`` by 4, so any numeric type verl accepts keeps its type and value."""
    truth = {"target": ["Paris"]}
    response = "<answer>Paris</answer>" * 11
    with contextlib.redirect_stdout(io.StringIO()):
        expected = verl_qa.compute_score(response, truth, score=score)
    assert _same(search_r1.compute_score(response, truth, score=score), expected)
