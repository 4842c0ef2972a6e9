"""SQuAD 2.0 (``compat="squad_v2"``, ``squad_v2_scores``): hand-worked rows, the official
script's logic restated, published vectors, properties and errors.

HF evaluate's ``squad_v2`` downloads its script, so it cannot run offline; the oracle here is
the official ``evaluate-v2.0.py`` logic (github.com/rajpurkar/SQuAD-explorer; the same code is
github.com/huggingface/evaluate ``metrics/squad_v2/compute_score.py``), restated below from its
rules:

- normalize: lower, delete ASCII punctuation, articles -> space, collapse whitespace;
- golds: the answers that normalize to a non-empty string; if none, the golds are [""];
- EM: int(normalize(gold) == normalize(prediction)), max over golds;
- F1: tokens = normalize(text).split(); if either token list is empty, int(both equal);
  0 when no token is shared; else P = same / len(pred), R = same / len(gold),
  F = (2 * P * R) / (P + R); max over golds;
- a question has an answer when its answers list is non-empty (``bool(qa["answers"])``);
- a no-answer probability above the threshold makes the row score float(not has_answer);
- report: 100.0 * sum / total per group; HasAns/NoAns only for non-empty groups;
  best_* from the raw scores by increasing probability, when probabilities are given.
"""

from __future__ import annotations

import collections
import random
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.metrics import (
    ExactMatch,
    TokenF1,
    exact_match,
    f1,
    get_metric,
    score,
    signature,
    squad_v2_scores,
)


# --- the official logic, restated -------------------------------------------------------------
def _normalize(text: str) -> str:
    text = "".join(char for char in text.lower() if char not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return _normalize(text).split() if text else []


def _official_exact(gold: str, prediction: str) -> int:
    return int(_normalize(gold) == _normalize(prediction))


def _official_f1(gold: str, prediction: str) -> float:
    gold_tokens, predicted = _tokens(gold), _tokens(prediction)
    if not gold_tokens or not predicted:
        return int(gold_tokens == predicted)
    same = sum((collections.Counter(gold_tokens) & collections.Counter(predicted)).values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(predicted)
    recall = 1.0 * same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def _official_golds(answers: list[str]) -> list[str]:
    return [answer for answer in answers if _normalize(answer)] or [""]


def _official_row(prediction: str, answers: list[str]) -> tuple[float, float]:
    golds = _official_golds(answers)
    return (
        max(_official_exact(gold, prediction) for gold in golds),
        max(_official_f1(gold, prediction) for gold in golds),
    )


def _official_report(
    predictions: list[str],
    answers: list[list[str]],
    probabilities: list[float] | None,
    threshold: float,
) -> dict[str, float]:
    """The official report on the 0-100 scale, as evaluate-v2.0.py's main() builds it."""
    ids = [f"q{i}" for i in range(len(predictions))]
    preds = dict(zip(ids, predictions, strict=True))
    has_answer = {qid: bool(golds) for qid, golds in zip(ids, answers, strict=True)}
    na_probs = dict(zip(ids, probabilities or [0.0] * len(ids), strict=True))
    raw = {qid: _official_row(preds[qid], golds) for qid, golds in zip(ids, answers, strict=True)}
    exact_raw = {qid: value[0] for qid, value in raw.items()}
    f1_raw = {qid: value[1] for qid, value in raw.items()}

    def thresholded(scores: dict[str, float]) -> dict[str, float]:
        return {
            qid: float(not has_answer[qid]) if na_probs[qid] > threshold else value
            for qid, value in scores.items()
        }

    exact, f1_scores = thresholded(exact_raw), thresholded(f1_raw)

    def group(qids: list[str]) -> dict[str, float]:
        total = len(qids)
        return {
            "exact": 100.0 * sum(exact[q] for q in qids) / total,
            "f1": 100.0 * sum(f1_scores[q] for q in qids) / total,
            "total": total,
        }

    report = group(ids)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in ids if has_answer[q] is wanted]
        if qids:
            report.update({f"{prefix}_{k}": v for k, v in group(qids).items()})
    if probabilities is not None:
        for key, scores in (("exact", exact_raw), ("f1", f1_raw)):
            current = best = sum(1 for q in ids if not has_answer[q])
            best_threshold = 0.0
            for qid in sorted(na_probs, key=lambda k: na_probs[k]):
                if has_answer[qid]:
                    current += scores[qid]
                elif preds[qid]:
                    current += -1
                if current > best:
                    best, best_threshold = current, na_probs[qid]
            report[f"best_{key}"] = 100.0 * best / len(scores)
            report[f"best_{key}_thresh"] = best_threshold
    return report


def _unit_scale(report: dict[str, float]) -> dict[str, float]:
    """The official percentages divided by 100, counts and thresholds as they are."""
    return {
        key: value if key.endswith(("total", "thresh")) else value / 100
        for key, value in report.items()
    }


# --- hand-worked rows -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prediction", "targets", "em", "f1_value", "rule"),
    [
        ("Paris", ["Paris"], 1.0, 1.0, "answerable, equal"),
        ("", [""], 1.0, 1.0, "gold '' -> unanswerable; empty prediction agrees"),
        ("the", [""], 1.0, 1.0, "'the' normalizes to '' -> counts as no answer"),
        ("?!", ["an", "..."], 1.0, 1.0, "every gold normalizes to '' -> unanswerable"),
        ("Paris", [""], 0.0, 0.0, "unanswerable, prediction has tokens"),
        ("the", ["Paris"], 0.0, 0.0, "answerable, prediction without tokens: F1 int([] == [..])"),
        ("", ["Paris"], 0.0, 0.0, "answerable, empty prediction"),
        ("a", ["the", "Paris"], 0.0, 0.0, "'the' dropped, golds ['paris']: v1.1 EM would be 1"),
        ("", ["", "Paris"], 0.0, 0.0, "'' dropped: answerable, v1.1 EM would be 1"),
        (" The  Cat! ", ["cat"], 1.0, 1.0, "same normalization as v1.1"),
        # F1 = (2 * 1.0 * 0.5) / (1.0 + 0.5): 'cat' vs 'cat sat'
        ("the cat", ["a cat sat"], 0.0, 0.6666666666666666, "P = 1/1, R = 1/2"),
        # 'paris france' vs 'paris': P = 1/2, R = 1/1; vs 'france' the same; max
        ("Paris France", ["the", "Paris", "France"], 0.0, 0.6666666666666666, "max over golds"),
        # 'cat cat' vs 'cat': common = min(2, 1) = 1, P = 1/2, R = 1/1
        ("cat cat", ["cat"], 0.0, 0.6666666666666666, "multiset overlap"),
        ("dog", ["cat"], 0.0, 0.0, "no shared token"),
    ],
)
def test_hand_worked_rows(
    prediction: str, targets: list[str], em: float, f1_value: float, rule: str
) -> None:
    assert exact_match(prediction, targets, compat="squad_v2") == em, rule
    assert f1(prediction, targets, compat="squad_v2") == f1_value, rule
    assert _official_row(prediction, targets) == (em, f1_value), rule


def test_where_v2_and_v1_differ() -> None:
    # v1.1 keeps golds that normalize to "": an empty prediction matches them (EM 1) but F1 is 0.
    assert exact_match("", ["", "Paris"], compat="squad") == 1.0
    assert exact_match("", ["", "Paris"], compat="squad_v2") == 0.0
    assert f1("", "", compat="squad") == 0.0
    assert f1("", "", compat="squad_v2") == 1.0
    assert f1("the", "an", compat="squad_v2") == 1.0


# --- the official logic on generated rows -----------------------------------------------------
WORDS = ["the", "a", "an", "cat", "Cat", "sat", "mat", "U.S.", "1,000", "théâtre", "東京", "", " "]
answers_text = st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join) | st.text(max_size=12)


@settings(max_examples=400, deadline=None)
@given(answers_text, st.lists(answers_text | st.sampled_from(["", "the", "?"]), min_size=1))
def test_matches_the_official_logic(prediction: str, targets: list[str]) -> None:
    em, f1_value = _official_row(prediction, targets)
    assert exact_match(prediction, targets, compat="squad_v2") == em
    assert f1(prediction, targets, compat="squad_v2") == f1_value
    assert score("f1", prediction, targets, compat="squad_v2") == f1_value


@settings(max_examples=400, deadline=None)
@given(answers_text, st.lists(answers_text, min_size=1))
def test_v2_equals_v1_when_answerable_and_the_prediction_has_tokens(
    prediction: str, targets: list[str]
) -> None:
    if not _normalize(prediction) or not any(_normalize(target) for target in targets):
        return
    assert exact_match(prediction, targets, compat="squad_v2") == exact_match(
        prediction, targets, compat="squad"
    )
    assert f1(prediction, targets, compat="squad_v2") == f1(prediction, targets, compat="squad")


def test_rows_of_a_group_share_golds() -> None:
    # The gold cache remembers golds by value; v1.1 and v2 on the same golds must not mix.
    golds = ("the", "Paris")
    for _ in range(3):
        assert exact_match("an", golds, compat="squad") == 1.0
        assert exact_match("an", golds, compat="squad_v2") == 0.0
        assert f1("Paris", golds, compat="squad_v2") == 1.0


# --- options and signatures -------------------------------------------------------------------
def test_signatures_and_options() -> None:
    assert signature("exact_match", compat="squad_v2") == "exact_match|compat:squad_v2|norm:squad"
    assert signature("f1", compat="squad_v2") == "f1|compat:squad_v2|norm:squad|tok:split"
    assert get_metric("f1", compat="squad_v2")("", "") == 1.0
    assert (
        repr(ExactMatch(compat="squad_v2")) == "<ExactMatch exact_match|compat:squad_v2|norm:squad>"
    )
    with pytest.raises(InvalidOption, match="compat='squad_v2' fixes normalizer"):
        TokenF1(compat="squad_v2", normalizer="squad")
    with pytest.raises(InvalidOption, match="valid values: squad, squad_v2"):
        ExactMatch(compat="squad2")
    with pytest.raises(InvalidInput, match="targets is empty"):
        exact_match("", [], compat="squad_v2")


# --- squad_v2_scores --------------------------------------------------------------------------
# Published examples of huggingface/evaluate, metrics/squad_v2/README.md ("Examples"): its
# wrapper always passes the no-answer probabilities, hence the best_* keys.
@pytest.mark.parametrize(
    ("predictions", "answers", "expected"),
    [
        (
            ["1976"],
            [["1976"]],
            {"exact": 100.0, "f1": 100.0, "total": 1, "HasAns_exact": 100.0, "HasAns_f1": 100.0,
             "HasAns_total": 1, "best_exact": 100.0, "best_exact_thresh": 0.0, "best_f1": 100.0,
             "best_f1_thresh": 0.0},
        ),
        (
            ["1999"],
            [["1976"]],
            {"exact": 0.0, "f1": 0.0, "total": 1, "HasAns_exact": 0.0, "HasAns_f1": 0.0,
             "HasAns_total": 1, "best_exact": 0.0, "best_exact_thresh": 0.0, "best_f1": 0.0,
             "best_f1_thresh": 0.0},
        ),
        (
            ["1976", "Beyonce", "climate change"],
            [["1976"], ["Beyoncé and Bruno Mars"], ["climate change"]],
            {"exact": 66.66666666666667, "f1": 66.66666666666667, "total": 3,
             "HasAns_exact": 66.66666666666667, "HasAns_f1": 66.66666666666667, "HasAns_total": 3,
             "best_exact": 66.66666666666667, "best_exact_thresh": 0.0,
             "best_f1": 66.66666666666667, "best_f1_thresh": 0.0},
        ),
    ],
)  # fmt: skip
def test_published_examples(
    predictions: list[str], answers: list[list[str]], expected: dict[str, float]
) -> None:
    report = squad_v2_scores(predictions, answers, na_probabilities=[0.0] * len(predictions))
    assert report == _unit_scale(expected)
    assert list(report) == list(expected)


def test_hand_worked_report() -> None:
    # Rows (EM, F1): "Paris"/"Paris" (1, 1); "black cat"/"cat": P = 1/2, R = 1/1, F1 =
    # (2 * 0.5 * 1.0) / 1.5 (0, 2/3); no answer + "" (1, 1); no answer + "Rome" (0, 0).
    predictions = ["Paris", "black cat", "", "Rome"]
    targets: list[object] = [["Paris"], "cat", [], []]
    report = squad_v2_scores(predictions, targets)  # type: ignore[arg-type]
    f1_sum = 1.0 + 0.6666666666666666 + 1.0 + 0.0
    assert report == {
        "exact": 100.0 * 2 / 4 / 100,
        "f1": 100.0 * f1_sum / 4 / 100,
        "total": 4,
        "HasAns_exact": 100.0 * 1 / 2 / 100,
        "HasAns_f1": 100.0 * (1.0 + 0.6666666666666666) / 2 / 100,
        "HasAns_total": 2,
        "NoAns_exact": 100.0 * 1 / 2 / 100,
        "NoAns_f1": 100.0 * 1 / 2 / 100,
        "NoAns_total": 2,
    }


def test_groups_present_only_when_not_empty() -> None:
    assert list(squad_v2_scores(["a"], [["a"]])) == [
        "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total"
    ]  # fmt: skip
    assert list(squad_v2_scores(["a"], [[]])) == [
        "exact", "f1", "total", "NoAns_exact", "NoAns_f1", "NoAns_total"
    ]  # fmt: skip


def test_has_answer_is_a_non_empty_answer_list() -> None:
    # ["the"] is a non-empty answers list: HasAns, though its only gold normalizes to "" and
    # an empty prediction therefore scores 1 (the official script's bool(qa["answers"])).
    report = squad_v2_scores(["", ""], [["the"], []])
    assert report["HasAns_total"] == 1 and report["NoAns_total"] == 1
    assert report["HasAns_exact"] == 1.0


def test_no_answer_threshold() -> None:
    predictions = ["Paris", "Rome", "Lyon"]
    targets: list[object] = [["Paris"], [], ["Nice"]]
    # Raw EM: 1, 0, 0. Above the threshold (0.5 > 0.5 is not above), a row scores
    # float(not has_answer): row 1 (p = 0.9, no answer) -> 1.0, row 2 (p = 0.6, answerable) -> 0.
    probabilities = [0.5, 0.9, 0.6]
    report = squad_v2_scores(
        predictions,
        targets,  # type: ignore[arg-type]
        na_probabilities=probabilities,
        na_threshold=0.5,
    )
    assert report["exact"] == 100.0 * 2 / 3 / 100
    assert report["NoAns_exact"] == 1.0 and report["HasAns_exact"] == 0.5
    # best thresholds from the raw scores: start at 1 (one unanswerable question); by
    # increasing probability: 0.5 -> +1 (answerable, EM 1) = 2, best, threshold 0.5;
    # 0.6 -> +0 = 2; 0.9 -> unanswerable with a non-empty prediction -> -1 = 1.
    assert report["best_exact"] == 100.0 * 2 / 3 / 100
    assert report["best_exact_thresh"] == 0.5
    default = squad_v2_scores(predictions, targets)  # type: ignore[arg-type]
    assert default["exact"] == 100.0 * 1 / 3 / 100  # default threshold 1.0: nothing above it
    assert "best_exact" not in default


probabilities = st.floats(0.0, 1.0) | st.sampled_from([0.0, 0.25, 0.5, 1.0])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            answers_text,
            st.lists(answers_text | st.just(""), max_size=3),
            probabilities,
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
    st.sampled_from([0.0, 0.3, 0.5, 1.0]),
)
def test_report_matches_the_official_logic(
    rows: list[tuple[str, list[str], float]], with_probabilities: bool, threshold: float
) -> None:
    predictions = [row[0] for row in rows]
    answers = [row[1] for row in rows]
    given_probabilities = [row[2] for row in rows] if with_probabilities else None
    expected = _official_report(predictions, answers, given_probabilities, threshold)
    report = squad_v2_scores(
        predictions, answers, na_probabilities=given_probabilities, na_threshold=threshold
    )
    assert report == _unit_scale(expected)
    assert list(report) == list(expected)


def test_report_on_a_larger_corpus() -> None:
    rng = random.Random(5)
    predictions = [" ".join(rng.choices(WORDS, k=rng.randint(0, 4))) for _ in range(500)]
    answers = [
        [" ".join(rng.choices(WORDS, k=rng.randint(0, 3))) for _ in range(rng.randint(0, 3))]
        for _ in range(500)
    ]
    chances = [rng.random() for _ in range(500)]
    expected = _official_report(predictions, answers, chances, 0.7)
    assert squad_v2_scores(
        predictions, answers, na_probabilities=chances, na_threshold=0.7
    ) == _unit_scale(expected)


def test_report_errors() -> None:
    with pytest.raises(InvalidInput, match="2 predictions but 3 targets"):
        squad_v2_scores(["a", "b"], [["a"], ["b"], ["c"]])
    with pytest.raises(InvalidInput, match="2 predictions but 1 na_probabilities"):
        squad_v2_scores(["a", "b"], [["a"], ["b"]], na_probabilities=[0.1])
    with pytest.raises(InvalidInput, match="no predictions"):
        squad_v2_scores([], [])
    with pytest.raises(InvalidInput, match=r"predictions\[1\].*must be a str, got int"):
        squad_v2_scores(["a", 3], [["a"], ["b"]])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"targets\[0\].*must be a str, got int"):
        squad_v2_scores(["a"], [[1]])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="predictions must be a list, got str"):
        squad_v2_scores("ab", ["a", "b"])
    with pytest.raises(
        InvalidInput, match=r"na_probabilities\[0\] must be a finite number, got str"
    ):
        squad_v2_scores(["a"], [["a"]], na_probabilities=["0.5"])  # type: ignore[list-item]
    for refused, shown in [
        (float("nan"), "float: nan"),
        (float("-inf"), "float: -inf"),
        (True, "bool: True"),
        (10**400, "an integer of 401 digits"),
    ]:
        with pytest.raises(
            InvalidInput, match=rf"na_probabilities\[1\] must be a finite number, got {shown}$"
        ):
            squad_v2_scores(["a", "b"], [["a"], ["b"]], na_probabilities=[0.5, refused])
    with pytest.raises(InvalidOption, match="na_threshold must be a finite number, got str"):
        squad_v2_scores(["a"], [["a"]], na_threshold="0.5")  # type: ignore[arg-type]
