"""Ground-truth shapes: every accepted one is read as a tuple of str, every other one is refused.

Numbers are golds too: an int (numpy integers included) or a float with an integral value is
written as its integer digits, another finite float as its ``repr``; a bool, NaN and infinities
are refused.

Refusals raise ``reward_plugins.InvalidGroundTruth`` (a ``ValueError``) naming the data source and
the type received. The routers never mutate their inputs, including the dicts that verl shares
across the rows of a GRPO group.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import io
import os
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reward_plugins
from reward_plugins import InvalidGroundTruth
from reward_plugins.groundtruth import coerce_golds
from reward_plugins.plugins import search_r1

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
ROUTERS: tuple[Callable[..., Any], ...] = (
    reward_plugins.compute_score,
    reward_plugins.compute_score_subem,
    reward_plugins.compute_score_f1,
)

PAIR = ("Paris", "paris city")

# (id, ground truth) -> golds ("Paris", "paris city") or ("Paris",)
ACCEPTED: list[tuple[str, Any, tuple[str, ...]]] = [
    ("dict-list", {"target": list(PAIR)}, PAIR),
    ("dict-tuple", {"target": PAIR}, PAIR),
    ("dict-object-ndarray", {"target": np.array(PAIR, dtype=object)}, PAIR),
    ("dict-unicode-ndarray", {"target": np.array(PAIR)}, PAIR),
    ("dict-ndarray-of-np-str", {"target": np.array([np.str_(g) for g in PAIR], object)}, PAIR),
    ("dict-list-of-np-str", {"target": [np.str_(g) for g in PAIR]}, PAIR),
    ("dict-str", {"target": "Paris"}, ("Paris",)),
    ("dict-np-str", {"target": np.str_("Paris")}, ("Paris",)),
    ("mapping-proxy", MappingProxyType({"target": list(PAIR)}), PAIR),
    ("dict-extra-keys", {"target": ["Paris"], "style": "rule"}, ("Paris",)),
    ("bare-list", list(PAIR), PAIR),
    ("bare-tuple", PAIR, PAIR),
    ("bare-ndarray", np.array(PAIR, dtype=object), PAIR),
    ("bare-unicode-ndarray", np.array(PAIR), PAIR),
    ("bare-str", "Paris", ("Paris",)),
    ("bare-np-str", np.str_("Paris"), ("Paris",)),
]


@pytest.mark.parametrize(
    ("ground_truth", "golds"),
    [case[1:] for case in ACCEPTED],
    ids=[case[0] for case in ACCEPTED],
)
def test_accepted_shapes(ground_truth: Any, golds: tuple[str, ...]) -> None:
    coerced = coerce_golds(ground_truth, "searchR1_nq")
    assert coerced == golds
    assert type(coerced) is tuple
    assert all(type(gold) is str for gold in coerced)
    for router in ROUTERS:
        assert router("searchR1_nq", "<answer>Paris</answer>", ground_truth)["score"] == 1.0
        assert router("searchR1_nq", "<answer>Lyon</answer>", ground_truth)["score"] == 0.0
    assert search_r1.compute_score("<answer>paris</answer>", ground_truth) == 1.0


EMPTY_TARGETS: list[tuple[str, Any]] = [
    ("list", []),
    ("tuple", ()),
    ("object-ndarray", np.array([], dtype=object)),
    ("unicode-ndarray", np.array([], dtype=str)),
    ("float-ndarray", np.array([])),  # what np.array([]) gives: no element to refuse
]


@pytest.mark.parametrize("target", [c[1] for c in EMPTY_TARGETS], ids=[c[0] for c in EMPTY_TARGETS])
def test_empty_target_never_matches(target: Any) -> None:
    assert coerce_golds({"target": target}) == ()
    for response in ("<answer>Paris</answer>", "<answer></answer>", "<answer>the</answer>"):
        for router in ROUTERS:
            result = router("searchR1_nq", response, {"target": target})
            assert result["score"] == 0.0
            assert (result["acc"], result["em"], result["subem"], result["f1"]) == (0, 0, 0, 0)
            assert result["answer_found"] == 1.0
        assert search_r1.compute_score_subem(response, {"target": target}) == 0.0
    assert (
        reward_plugins.compute_score("searchR1_nq", "no answer", {"target": target})["score"] == 0
    )


# (id, ground truth, type name the message must show)
REJECTED: list[tuple[str, Any, str]] = [
    ("none", None, "NoneType"),
    ("bool", True, "bool"),
    ("bytes", b"Paris", "bytes"),
    ("dict-without-target", {"answers": ["Paris"]}, "dict"),
    ("empty-dict", {}, "dict"),
    ("target-none", {"target": None}, "NoneType"),
    ("target-dict", {"target": {"text": "Paris"}}, "dict"),
    ("target-set", {"target": {"Paris"}}, "set"),
    ("bytes-elements-list", {"target": [b"Paris"]}, "bytes"),
    ("bytes-elements-ndarray", {"target": np.array([b"Paris"])}, "bytes"),
    ("none-element", {"target": ["Paris", None]}, "NoneType"),
    ("nested-list", {"target": [["Paris"]]}, "list"),
    ("nested-tuple", [("Paris",)], "tuple"),
    ("two-d-array", {"target": np.array([["Paris", "Lyon"]])}, "numpy.ndarray"),
    ("zero-d-array", np.array("Paris"), "numpy.ndarray"),
    ("target-bool", {"target": False}, "bool"),
    ("np-bool", np.bool_(True), "numpy.bool"),
    ("bool-element", {"target": ["Paris", True]}, "bool"),
    ("np-bool-element", {"target": ["Paris", np.bool_(False)]}, "numpy.bool"),
    ("bool-ndarray", {"target": np.array([True, False])}, "bool"),
    ("nan", float("nan"), "float"),
    ("target-inf", {"target": float("inf")}, "float"),
    ("minus-inf-element", {"target": ["Paris", -float("inf")]}, "float"),
    ("np-nan-element", {"target": [np.float64("nan")]}, "numpy.float64"),
    ("nan-ndarray", {"target": np.array([1.0, np.nan])}, "float"),
    ("complex", {"target": 1j}, "complex"),
    ("complex-element", {"target": ["Paris", 1 + 0j]}, "complex"),
    ("fraction-element", {"target": [Fraction(1, 2)]}, "fractions.Fraction"),
    ("decimal", Decimal("1.5"), "decimal.Decimal"),
    ("zero-d-int-array", np.array(7), "numpy.ndarray"),
]


@pytest.mark.parametrize(
    ("ground_truth", "type_name"),
    [case[1:] for case in REJECTED],
    ids=[case[0] for case in REJECTED],
)
def test_rejected_shapes(ground_truth: Any, type_name: str) -> None:
    for router in ROUTERS:
        with pytest.raises(InvalidGroundTruth) as caught:
            router("searchR1_hotpotqa", "<answer>Paris</answer>", ground_truth)
        assert isinstance(caught.value, ValueError)
        message = str(caught.value)
        assert "searchR1_hotpotqa" in message
        assert type_name in message
    with pytest.raises(InvalidGroundTruth):
        search_r1.compute_score("<answer>Paris</answer>", ground_truth)


def test_first_call_of_a_process_rejects_none() -> None:
    """The very first router call of a fresh process, with ``None``, raises InvalidGroundTruth.

    (A fresh process has no cached ground truth yet; run in a subprocess to be sure.)
    """
    code = (
        "import reward_plugins\n"
        "try:\n"
        "    reward_plugins.compute_score('searchR1_nq', '<answer>x</answer>', None)\n"
        "except reward_plugins.InvalidGroundTruth as error:\n"
        "    print('InvalidGroundTruth', error)\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)}
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPOSITORY_ROOT,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("InvalidGroundTruth data_source='searchR1_nq'")
    assert "NoneType" in completed.stdout


def test_message_names_the_row_field() -> None:
    with pytest.raises(InvalidGroundTruth, match=r"ground_truth\['target'\]\[1\]"):
        coerce_golds({"target": ["Paris", b"x"]}, "searchR1_nq")
    with pytest.raises(InvalidGroundTruth, match=r"^ground_truth"):
        coerce_golds(None)  # no data source known: the message starts with the field


# ------------------------------------------------------------------------- no input mutation


def _assert_identical(before: Any, after: Any) -> None:
    """Deep equality that also compares numpy arrays (dtype and content) and container types."""
    assert type(before) is type(after)
    if isinstance(before, dict):
        assert list(before) == list(after)
        for key in before:
            _assert_identical(before[key], after[key])
    elif isinstance(before, (list, tuple)):
        assert len(before) == len(after)
        for left, right in zip(before, after, strict=True):
            _assert_identical(left, right)
    elif isinstance(before, np.ndarray):
        assert before.dtype == after.dtype
        assert before.shape == after.shape
        assert before.tolist() == after.tolist()
    else:
        assert before == after


def _extra_info() -> dict[str, Any]:
    """An ``extra_info`` as verl's Search-R1 preprocessing and reward managers build it."""
    return {
        "index": 17,
        "need_tools_kwargs": True,
        "question": "capital of France?",
        "split": "train",
        "tools_kwargs": {
            "search": {"create_kwargs": {"ground_truth": ["Paris"], "data_source": "searchR1_nq"}}
        },
        "num_turns": 3,
        "rollout_reward_scores": {},
    }


@pytest.mark.parametrize(
    "target",
    [
        ["Paris", "paris city"],
        ("Paris",),
        np.array(["Paris", "x"], dtype=object),
        np.array(["Paris"]),
    ],
    ids=["list", "tuple", "object-ndarray", "unicode-ndarray"],
)
def test_group_of_eight_shares_inputs_without_mutation(target: Any) -> None:
    """One ground-truth dict and one extra_info dict serve a GRPO group of 8, unchanged."""
    ground_truth = {"target": target}
    extra_info = _extra_info()
    ground_truth_before, extra_info_before = copy.deepcopy(ground_truth), copy.deepcopy(extra_info)
    target_object = ground_truth["target"]
    responses = [
        f"<think>{i}</think><answer>{'Paris' if i % 2 else 'Lyon'}</answer>" for i in range(8)
    ]
    scores = []
    for router in ROUTERS:
        scores.append(
            [
                router("searchR1_nq", response, ground_truth, extra_info)["score"]
                for response in responses
            ]
        )
    batch = reward_plugins.compute_score_batch(
        ["searchR1_nq"] * 8, responses, [ground_truth] * 8, [extra_info] * 8
    )
    assert [result["score"] for result in batch] == scores[0]
    assert scores[0] == [0.0, 1.0] * 4
    _assert_identical(ground_truth_before, ground_truth)
    _assert_identical(extra_info_before, extra_info)
    assert ground_truth["target"] is target_object


def test_plugin_functions_do_not_mutate_inputs() -> None:
    ground_truth = {"target": np.array(["Paris"], dtype=object)}
    before = copy.deepcopy(ground_truth)
    with contextlib.redirect_stdout(io.StringIO()):
        for function in (search_r1.compute_score, search_r1.compute_score_subem):
            function("<answer>Paris</answer>" * 11, ground_truth)
    _assert_identical(before, ground_truth)


def _mutations() -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    def append(truth: dict[str, Any]) -> None:
        truth["target"].append("London")

    def replace_element(truth: dict[str, Any]) -> None:
        truth["target"][0] = "London"

    def clear(truth: dict[str, Any]) -> None:
        truth["target"].clear()

    def assign_new_list(truth: dict[str, Any]) -> None:
        truth["target"] = ["London"]

    def delete_target(truth: dict[str, Any]) -> None:
        del truth["target"]

    return [
        ("append", append),
        ("replace-element", replace_element),
        ("clear", clear),
        ("assign-new-list", assign_new_list),
        ("delete-target", delete_target),
    ]


def _array_mutations() -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    def replace_element(truth: dict[str, Any]) -> None:
        truth["target"][0] = "London"

    def reshape(truth: dict[str, Any]) -> None:
        truth["target"].shape = (1, 1)  # a 2-D target is refused

    def assign_new_array(truth: dict[str, Any]) -> None:
        truth["target"] = np.array(["London"], dtype=object)

    return [
        ("array-replace-element", replace_element),
        ("array-reshape", reshape),
        ("array-assign-new", assign_new_array),
    ]


@pytest.mark.parametrize(
    ("make_target", "mutate"),
    [(list, m[1]) for m in _mutations()]
    + [(lambda golds: np.array(golds, dtype=object), m[1]) for m in _array_mutations()]
    + [(lambda golds: np.array(golds), m[1]) for m in _array_mutations()[:1]],
    ids=[m[0] for m in _mutations()] + [m[0] for m in _array_mutations()] + ["str-array"],
)
def test_caller_mutating_the_target_between_calls(
    make_target: Callable[[list[str]], Any], mutate: Callable[[dict[str, Any]], None]
) -> None:
    """A caller that edits the gold list between calls gets scores for the current golds.

    verl's reference reads ``ground_truth["target"]`` afresh on every call, so after the edit the
    plugin functions and the routers must agree with it on the same dict object.
    """
    from verl.utils.reward_score import search_r1_like_qa_em as verl_qa

    ground_truth = {"target": make_target(["Paris"])}
    responses = ("<answer>Paris</answer>", "<answer>London</answer>")
    for response in responses:  # prime the per-object memo
        assert search_r1.compute_score(response, ground_truth) == (response == responses[0])
        reward_plugins.compute_score("searchR1_nq", response, ground_truth)
    mutate(ground_truth)
    for response in responses:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                expected = verl_qa.compute_score(response, ground_truth)
        except (KeyError, AttributeError):  # verl fails on a deleted or 2-D target: so do we
            with pytest.raises(InvalidGroundTruth):
                search_r1.compute_score(response, ground_truth)
            with pytest.raises(InvalidGroundTruth):
                reward_plugins.compute_score("searchR1_nq", response, ground_truth)
            continue
        assert search_r1.compute_score(response, ground_truth) == expected, response
        routed = reward_plugins.compute_score("searchR1_nq", response, ground_truth)
        assert routed["score"] == float(expected), response


# ------------------------------------------------------------- memo under concurrent mutation


class _MutatingGold(str):
    """A gold whose conversion to ``str`` edits the list it sits in: the edit lands while the
    golds are being read, as another thread's edit can."""

    target: list[Any]

    def __str__(self) -> str:
        self.target[0] = "London"
        return str.__str__(self)


def test_edit_while_the_golds_are_read_is_seen_by_the_next_call() -> None:
    """The memo keeps the golds with the very items they were read from: an edit that lands
    during the read cannot leave the memo pairing the new items with the old golds."""
    gold = _MutatingGold("Paris")
    target: list[Any] = [gold]
    gold.target = target
    ground_truth = {"target": target}
    assert coerce_golds(ground_truth) == ("Paris",)
    assert target == ["London"]
    assert coerce_golds(ground_truth) == ("London",)


def test_edit_right_after_the_read_is_seen_by_the_next_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same, with the edit landing just after the golds were read and before they are memoized
    (where another thread can run)."""
    from reward_plugins import groundtruth

    ground_truth = {"target": ["Paris"]}
    read = groundtruth._read_golds

    def read_then_edit(*args: Any, **kwargs: Any) -> Any:
        result = read(*args, **kwargs)
        ground_truth["target"][0] = "London"
        return result

    monkeypatch.setattr(groundtruth, "_read_golds", read_then_edit)
    assert coerce_golds(ground_truth) == ("Paris",)
    monkeypatch.setattr(groundtruth, "_read_golds", read)
    assert coerce_golds(ground_truth) == ("London",)


def test_threads_editing_the_target_in_place_never_get_stale_golds() -> None:
    """Readers and an in-place writer share one ground truth, as verl's thread pools can.

    The writer only writes fresh values, so a reader that sees the same items before and after
    its call knows the target did not change during the call: the golds must then be those
    items. Bounded to about two seconds.
    """
    import threading
    import time

    ground_truth = {"target": ["0", "x"]}
    target = ground_truth["target"]
    stop = threading.Event()
    stale: list[tuple[list[str], tuple[str, ...]]] = []
    calls = [0]

    def write() -> None:
        value = 0
        while not stop.is_set():
            value += 1
            target[0] = str(value)

    def read() -> None:
        count = 0
        while not stop.is_set():
            before = list(target)
            golds = coerce_golds(ground_truth)
            if list(target) == before and golds != tuple(before):
                stale.append((before, golds))
            count += 1
        calls[0] += count

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and len(stale) < 1:
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
    assert calls[0] > 0
    assert stale == [], f"{len(stale)} stale results in {calls[0]} calls, e.g. {stale[0]}"


# ------------------------------------------------------------------------ memo byte budget

KIB = 1024
MIB = 1024 * KIB


def _large_ground_truths(count: int, chars: int, alphabet: str = "abcdefgh") -> list[Any]:
    """``count`` distinct ground truths of ``chars`` characters each, in every memoized shape:
    a list of str, a tuple, a unicode array, an object array (each fresh, none shared)."""
    shapes: list[Callable[[list[str]], Any]] = [
        lambda golds: {"target": golds},
        lambda golds: {"target": tuple(golds)},
        lambda golds: {"target": np.array(golds)},
        lambda golds: np.array(golds, dtype=object),
    ]
    truths = []
    for index in range(count):
        letter = alphabet[index % len(alphabet)]
        golds = [f"{index}:" + letter * (chars // 4) for _ in range(4)]
        truths.append(shapes[index % len(shapes)](golds))
    return truths


def test_memo_byte_budget_is_64_mib() -> None:
    from reward_plugins import groundtruth

    assert groundtruth.MEMO_BYTE_BUDGET == 64 * MIB


def test_memo_estimate_stays_within_the_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many large ground truths pass through it, the memo's estimated size never exceeds
    its byte budget, and its running total is the sum of its entries' estimates."""
    from reward_plugins import groundtruth

    monkeypatch.setattr(groundtruth, "MEMO_BYTE_BUDGET", 1 * MIB, raising=False)
    groundtruth._clear_memo()
    for alphabet in ("abc", "\u4e2d\u6587", "\U0001f600\U0001f601"):
        for truth in _large_ground_truths(300, 64 * KIB, alphabet):
            golds = coerce_golds(truth)
            assert len(golds) == 4
            assert groundtruth._memo_bytes() <= groundtruth.MEMO_BYTE_BUDGET
            entries = groundtruth._memo.values()
            assert groundtruth._memo_bytes() == sum(entry[4] for entry in entries)
    assert len(groundtruth._memo) > 0  # 64 KiB ground truths are still memoized
    groundtruth._clear_memo()


def test_memo_skips_a_ground_truth_over_a_quarter_of_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reward_plugins import groundtruth

    monkeypatch.setattr(groundtruth, "MEMO_BYTE_BUDGET", 1 * MIB, raising=False)
    small, large = {"target": ["Paris"]}, {"target": ["x" * (300 * KIB)]}
    assert coerce_golds(small) == ("Paris",)
    assert id(small) in groundtruth._memo
    assert coerce_golds(large) == ("x" * (300 * KIB),)
    assert id(large) not in groundtruth._memo
    large["target"][0] = "Lyon"
    assert coerce_golds(large) == ("Lyon",)
    assert id(large) in groundtruth._memo


@pytest.mark.parametrize(
    "alphabet", ["abcdefgh", "\U0001f600\U0001f601"], ids=["one-byte", "four-byte"]
)
def test_memo_keeps_no_more_than_its_budget_allocated(
    monkeypatch: pytest.MonkeyPatch, alphabet: str
) -> None:
    """200 ground truths of 256 KiB, each dropped by the caller after one call, leave at most the
    budget (plus slack) allocated: the memo, which keeps them alive, is bounded in bytes."""
    import gc
    import tracemalloc

    from reward_plugins import groundtruth

    budget = 4 * MIB
    monkeypatch.setattr(groundtruth, "MEMO_BYTE_BUDGET", budget, raising=False)
    groundtruth._clear_memo()
    chars = 256 * KIB // (1 if alphabet.isascii() else 4)
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for index in range(200):
            (truth,) = _large_ground_truths(1, chars, alphabet[index % len(alphabet)] * 2)
            coerce_golds(truth)
            del truth
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
        groundtruth._clear_memo()
    assert retained <= budget + 1 * MIB, f"{retained / MIB:.1f} MiB retained"


# -------------------------------------------------------------------------------- numeric golds


class _Rank(enum.IntEnum):
    FIRST = 1


# (id, ground truth, golds)
NUMERIC: list[tuple[str, Any, tuple[str, ...]]] = [
    ("bare-int", 72, ("72",)),
    ("dict-int", {"target": 72}, ("72",)),
    ("negative-int", {"target": -5}, ("-5",)),
    ("big-int", 2**70, (str(2**70),)),
    ("int-enum", {"target": _Rank.FIRST}, ("1",)),
    ("bare-integral-float", 72.0, ("72",)),
    ("negative-integral-float", {"target": -3.0}, ("-3",)),
    ("negative-zero", {"target": -0.0}, ("0",)),
    ("huge-integral-float", {"target": 1e20}, ("100000000000000000000",)),
    ("float", {"target": 0.5}, ("0.5",)),
    ("bare-float", 1.5, ("1.5",)),
    ("tiny-float", {"target": 1e-300}, ("1e-300",)),
    ("np-int64", {"target": np.int64(7)}, ("7",)),
    ("np-uint64-max", {"target": np.uint64(2**64 - 1)}, ("18446744073709551615",)),
    ("np-float32", {"target": np.float32(0.5)}, ("0.5",)),
    ("np-float32-inexact", {"target": np.float32(0.1)}, (repr(float(np.float32(0.1))),)),
    ("np-float32-integral", np.float32(3.0), ("3",)),
    ("np-float64", {"target": np.float64(2.25)}, ("2.25",)),
    ("mixed-list", {"target": [72, "seventy-two"]}, ("72", "seventy-two")),
    ("mixed-tuple", (1990, "1990s", 2.5), ("1990", "1990s", "2.5")),
    ("bare-mixed-list", ["Paris", 7.0], ("Paris", "7")),
    ("int-ndarray", {"target": np.array([1, 2])}, ("1", "2")),
    ("float-ndarray", {"target": np.array([0.5])}, ("0.5",)),
    ("integral-float-ndarray", np.array([1.0, 2.5]), ("1", "2.5")),
    ("uint8-ndarray", {"target": np.array([255], dtype=np.uint8)}, ("255",)),
    (
        "object-ndarray-of-np-scalars",
        {"target": np.array([np.int64(7), np.float64(2.0), np.str_("x")], dtype=object)},
        ("7", "2", "x"),
    ),
]


@pytest.mark.parametrize(
    ("ground_truth", "golds"),
    [case[1:] for case in NUMERIC],
    ids=[case[0] for case in NUMERIC],
)
def test_numeric_golds(ground_truth: Any, golds: tuple[str, ...]) -> None:
    coerced = coerce_golds(ground_truth, "searchR1_nq")
    assert coerced == golds
    assert all(type(gold) is str for gold in coerced)
    assert coerce_golds(ground_truth) == golds  # again, from the memo where it applies
    response = f"<answer>{golds[0]}</answer>"
    for router in ROUTERS:
        assert router("searchR1_nq", response, ground_truth)["score"] == 1.0
        assert router("searchR1_nq", "<answer>Lyon</answer>", ground_truth)["score"] == 0.0
    assert search_r1.compute_score(response, ground_truth) == 1.0


@pytest.mark.parametrize(
    ("ground_truth", "field", "type_name"),
    [
        (True, "ground_truth", "bool"),
        ({"target": np.bool_(True)}, "ground_truth['target']", "numpy.bool"),
        ({"target": [72, True]}, "ground_truth['target'][1]", "bool"),
        ({"target": ["x", np.bool_(True)]}, "ground_truth['target'][1]", "numpy.bool"),
        ({"target": np.array([False])}, "ground_truth['target'][0]", "bool"),
        (float("nan"), "ground_truth", "float"),
        ({"target": float("inf")}, "ground_truth['target']", "float"),
        ({"target": ["x", -float("inf")]}, "ground_truth['target'][1]", "float"),
        ({"target": [np.float32("nan")]}, "ground_truth['target'][0]", "numpy.float32"),
        ({"target": ["Paris", None]}, "ground_truth['target'][1]", "NoneType"),
        ({"target": [7, b"Paris"]}, "ground_truth['target'][1]", "bytes"),
        ({"target": b"7"}, "ground_truth['target']", "bytes"),
    ],
    ids=[
        "bool",
        "np-bool",
        "bool-item",
        "np-bool-item",
        "bool-array",
        "nan",
        "inf",
        "minus-inf-item",
        "np-nan-item",
        "none-item",
        "bytes-item",
        "bytes",
    ],
)
def test_numeric_refusals_name_the_field_and_type(
    ground_truth: Any, field: str, type_name: str
) -> None:
    with pytest.raises(InvalidGroundTruth) as caught:
        coerce_golds(ground_truth, "searchR1_nq")
    message = str(caught.value)
    assert message.startswith(f"data_source='searchR1_nq': {field} "), message
    assert f"got {type_name}:" in message, message


def test_int_beyond_the_str_digit_limit_is_refused() -> None:
    if not hasattr(sys, "get_int_max_str_digits"):
        pytest.skip("no int-to-str digit limit before Python 3.11")
    limit = sys.get_int_max_str_digits()
    if limit == 0:
        pytest.skip("the int-to-str digit limit is disabled")
    with pytest.raises(InvalidGroundTruth, match=r"ground_truth\['target'\]\[0\]"):
        coerce_golds({"target": [10 ** (limit + 1)]})


@settings(max_examples=500, deadline=None)
@given(st.integers())
def test_ints_round_trip(number: int) -> None:
    (gold,) = coerce_golds({"target": [number]})
    assert gold == str(number)
    assert int(gold) == number
    assert coerce_golds(number) == (gold,)


@settings(max_examples=300, deadline=None)
@given(st.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max))
def test_numpy_ints_round_trip(number: int) -> None:
    assert coerce_golds({"target": np.array([number])}) == (str(number),)
    assert coerce_golds({"target": np.int64(number)}) == (str(number),)


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False).filter(float.is_integer))
def test_integral_floats_print_as_ints(number: float) -> None:
    (gold,) = coerce_golds({"target": [number]})
    assert gold.lstrip("-").isdigit(), gold
    assert int(gold) == number
    assert coerce_golds(np.float64(number)) == (gold,)


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_round_trip(number: float) -> None:
    (gold,) = coerce_golds({"target": ["x", number]})[1:]
    assert float(gold) == number
    if not number.is_integer():
        assert gold == repr(number)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_round_trip(number: float) -> None:
    (gold,) = coerce_golds({"target": np.array([number], dtype=np.float32)})
    assert float(gold) == float(np.float32(number))


def test_numeric_golds_are_memoized_and_edits_are_seen() -> None:
    """A list holding numbers is memoized like a list of strings; an edit to an equal value of
    another type (``True == 1``) is still seen."""
    from reward_plugins import groundtruth

    ground_truth = {"target": [1, "one"]}
    golds = coerce_golds(ground_truth)
    assert golds == ("1", "one")
    assert id(ground_truth) in groundtruth._memo
    assert coerce_golds(ground_truth) is golds
    ground_truth["target"][0] = 2.0
    assert coerce_golds(ground_truth) == ("2", "one")
    ground_truth["target"][0] = 2.5
    assert coerce_golds(ground_truth) == ("2.5", "one")
    ground_truth["target"][0] = 1
    assert coerce_golds(ground_truth) == ("1", "one")
    ground_truth["target"][0] = True  # equal to 1, but a bool
    with pytest.raises(InvalidGroundTruth, match=r"\[0\]"):
        coerce_golds(ground_truth)
    array_truth = {"target": np.array([1, 0], dtype=np.int8)}
    assert coerce_golds(array_truth) == ("1", "0")
    assert coerce_golds(array_truth) == ("1", "0")
    array_truth["target"].dtype = np.bool_  # the same bytes, read as booleans
    with pytest.raises(InvalidGroundTruth, match="bool"):
        coerce_golds(array_truth)
