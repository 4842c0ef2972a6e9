"""Options of the Search-R1 scorers: each one changes exactly what it should, and nothing else.

Every option is checked through the verl-compatible plugin functions (keywords) and through the
routers (verl's ``reward_kwargs`` arrive there as keywords). Typos and bad values are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import reward_plugins
from reward_plugins import InvalidOption, registry
from reward_plugins.plugins import search_r1

GOLD = {"target": ["Paris"]}

RESPONSES: dict[str, str] = {
    "none": "no answer at all",
    "wrong": "<answer>London</answer>",
    "correct": "<answer>Paris</answer>",
    "correct-4": "<answer>Paris</answer>" * 4,
    "correct-11": "<answer>Paris</answer>" * 11,
    "wrong-11": "<answer>London</answer>" * 11,
    "subem-only": "<answer>Paris, France</answer>",
    "subem-only-11": "<answer>Paris, France</answer>" * 11,
    "first-correct": "<answer>Paris</answer><answer>London</answer>",
    "first-wrong": "<answer>London</answer><answer>Paris</answer>",
}

DEFAULT_EM: dict[str, float] = {
    "none": 0,
    "wrong": 0.0,
    "correct": 1.0,
    "correct-4": 1.0,
    "correct-11": 0.25,
    "wrong-11": 0.0,
    "subem-only": 0.0,
    "subem-only-11": 0.0,
    "first-correct": 0.0,
    "first-wrong": 1.0,
}
DEFAULT_SUBEM: dict[str, float] = {
    **DEFAULT_EM,
    "correct-11": 1.0,
    "subem-only": 1.0,
    "subem-only-11": 1.0,
}

# (id, scorer, options, the responses whose score changes -> new score, the responses whose
# router result has spam_penalized == 1.0); all other responses keep the default score.
OPTION_EFFECTS: list[tuple[str, str, dict[str, Any], dict[str, float], set[str]]] = [
    (
        "em-format_score",
        "em",
        {"format_score": 0.3},
        {
            "wrong": 0.3,
            "wrong-11": 0.3,
            "subem-only": 0.3,
            "subem-only-11": 0.3,
            "first-correct": 0.3,
        },
        {"correct-11"},
    ),
    (
        "em-score",
        "em",
        {"score": 2.0},
        {"correct": 2.0, "correct-4": 2.0, "correct-11": 0.5, "first-wrong": 2.0},
        {"correct-11"},
    ),
    (
        "em-max_answer_tags-3",
        "em",
        {"max_answer_tags": 3},
        {"correct-4": 0.25},
        {"correct-4", "correct-11"},
    ),
    ("em-max_answer_tags-11", "em", {"max_answer_tags": 11}, {"correct-11": 1.0}, set()),
    ("em-spam_factor", "em", {"spam_factor": 0.5}, {"correct-11": 0.5}, {"correct-11"}),
    ("em-spam_factor-zero", "em", {"spam_factor": 0.0}, {"correct-11": 0.0}, {"correct-11"}),
    (
        "em-extract-first",
        "em",
        {"extract": "first"},
        {"first-correct": 1.0, "first-wrong": 0.0},
        {"correct-11"},
    ),
    ("em-extract-last", "em", {"extract": "last"}, {}, {"correct-11"}),
    (
        "subem-format_score",
        "subem",
        {"format_score": 0.3},
        {"wrong": 0.3, "wrong-11": 0.3, "first-correct": 0.3},
        set(),
    ),
    (
        "subem-score",
        "subem",
        {"score": 2.0},
        {
            "correct": 2.0,
            "correct-4": 2.0,
            "correct-11": 2.0,
            "subem-only": 2.0,
            "subem-only-11": 2.0,
            "first-wrong": 2.0,
        },
        set(),
    ),
    # without penalize_subem the spam options have no effect on SubEM
    ("subem-max_answer_tags-alone", "subem", {"max_answer_tags": 3}, {}, set()),
    ("subem-spam_factor-alone", "subem", {"spam_factor": 0.5}, {}, set()),
    (
        "subem-penalize",
        "subem",
        {"penalize_subem": True},
        {"correct-11": 0.25, "subem-only-11": 0.25},
        {"correct-11", "subem-only-11"},
    ),
    (
        "subem-penalize-max-3",
        "subem",
        {"penalize_subem": True, "max_answer_tags": 3},
        {"correct-4": 0.25, "correct-11": 0.25, "subem-only-11": 0.25},
        {"correct-4", "correct-11", "subem-only-11"},
    ),
    (
        "subem-penalize-factor",
        "subem",
        {"penalize_subem": True, "spam_factor": 0.5},
        {"correct-11": 0.5, "subem-only-11": 0.5},
        {"correct-11", "subem-only-11"},
    ),
    ("subem-penalize-false", "subem", {"penalize_subem": False}, {}, set()),
    (
        "subem-extract-first",
        "subem",
        {"extract": "first"},
        {"first-correct": 1.0, "first-wrong": 0.0},
        set(),
    ),
]


def _plugin(scorer: str) -> Callable[..., Any]:
    return search_r1.compute_score if scorer == "em" else search_r1.compute_score_subem


def _router(scorer: str) -> Callable[..., Any]:
    return reward_plugins.compute_score if scorer == "em" else reward_plugins.compute_score_subem


@pytest.mark.parametrize(
    ("scorer", "options", "changes", "penalized"),
    [case[1:] for case in OPTION_EFFECTS],
    ids=[case[0] for case in OPTION_EFFECTS],
)
def test_option_changes_exactly_its_rows(
    scorer: str, options: dict[str, Any], changes: dict[str, float], penalized: set[str]
) -> None:
    defaults = DEFAULT_EM if scorer == "em" else DEFAULT_SUBEM
    for name, response in RESPONSES.items():
        expected = changes.get(name, defaults[name])
        got = _plugin(scorer)(response, GOLD, **options)
        assert got == expected, name
        if name == "none":
            assert type(got) is int  # options never change the no-answer 0
        routed = _router(scorer)("searchR1_nq", response, GOLD, None, **options)
        assert routed["score"] == float(expected), name
        assert routed["spam_penalized"] == float(name in penalized), name


def test_defaults_equal_the_explicit_verl_values() -> None:
    explicit = {
        "format_score": 0.0,
        "score": 1.0,
        "max_answer_tags": 10,
        "spam_factor": 0.25,
        "extract": "last",
    }
    for name, response in RESPONSES.items():
        for scorer in ("em", "subem"):
            options = dict(explicit, **({"penalize_subem": False} if scorer == "subem" else {}))
            plain = _router(scorer)("searchR1_nq", response, GOLD)
            assert _router(scorer)("searchR1_nq", response, GOLD, **options) == plain, name
            assert _plugin(scorer)(response, GOLD, **options) == _plugin(scorer)(response, GOLD)


def test_routed_options_reach_the_f1_scorer() -> None:
    half = "<answer>Paris France</answer>"  # F1 2/3 against "Paris"
    assert reward_plugins.compute_score_f1("searchR1_nq", half, GOLD)["score"] == pytest.approx(
        2 / 3
    )
    assert reward_plugins.compute_score_f1("searchR1_nq", half, GOLD, score=3.0)["score"] == (
        pytest.approx(2.0)
    )
    spam = half * 4
    result = reward_plugins.compute_score_f1("searchR1_nq", spam, GOLD, max_answer_tags=3)
    assert (result["score"], result["spam_penalized"]) == (pytest.approx(1 / 6), 1.0)
    first = "<answer>Paris</answer><answer>Lyon</answer>"
    assert reward_plugins.compute_score_f1("searchR1_nq", first, GOLD, extract="first")["f1"] == 1.0
    assert reward_plugins.compute_score_f1("searchR1_nq", first, GOLD)["f1"] == 0.0


# ------------------------------------------------------------------------- refused options

ISSUE_OPTIONS = {"extract", "format_score", "max_answer_tags", "score", "spam_factor"}


@pytest.mark.parametrize(
    ("router", "typo"),
    [
        (reward_plugins.compute_score, "fromat_score"),
        (reward_plugins.compute_score, "penalize_subem"),  # a SubEM-only option
        (reward_plugins.compute_score, "method"),  # verl's unused positional, not an option
        (reward_plugins.compute_score_subem, "spam_facter"),
        (reward_plugins.compute_score_f1, "max_answer_tag"),
    ],
)
def test_unknown_option_is_a_type_error_listing_valid_ones(
    router: Callable[..., Any], typo: str
) -> None:
    with pytest.raises(InvalidOption) as caught:
        router("searchR1_nq", RESPONSES["correct"], GOLD, **{typo: 1})
    assert isinstance(caught.value, TypeError)
    message = str(caught.value)
    prefix = f"{router.__name__}: unknown option(s) {typo!r}; valid options: "
    assert message.startswith(prefix)
    assert "data_source=" not in message
    names = message.removeprefix(prefix).split(", ")
    assert names == sorted(names)
    listed = set(names)
    assert listed == set(registry.lookup("searchR1_nq", router.__name__).options)
    assert listed >= ISSUE_OPTIONS
    assert ("penalize_subem" in listed) == (router is reward_plugins.compute_score_subem)


def test_unknown_option_on_the_plugin_functions() -> None:
    with pytest.raises(
        InvalidOption, match=r"^compute_score: unknown option\(s\) 'fromat_score'; "
    ):
        search_r1.compute_score(RESPONSES["correct"], GOLD, fromat_score=0.1)
    with pytest.raises(InvalidOption, match=r"^compute_score: unknown option\(s\) 'penalize_sub"):
        search_r1.compute_score(RESPONSES["correct"], GOLD, penalize_subem=True)


BAD_VALUES: list[tuple[str, Any, type[Exception]]] = [
    ("max_answer_tags", "10", TypeError),
    ("max_answer_tags", 10.0, TypeError),
    ("max_answer_tags", True, TypeError),
    ("max_answer_tags", None, TypeError),
    ("spam_factor", "0.5", TypeError),
    ("spam_factor", None, TypeError),
    ("spam_factor", True, TypeError),
    ("extract", "middle", ValueError),
    ("extract", "LAST", ValueError),
    ("extract", None, ValueError),
]


@pytest.mark.parametrize(("option", "value", "error"), BAD_VALUES)
@pytest.mark.parametrize("response", ["none", "wrong", "correct"])
def test_bad_option_values(option: str, value: Any, error: type[Exception], response: str) -> None:
    """Refused on every branch (not only when the option is used), naming the option."""
    text = RESPONSES[response]
    calls: list[Callable[[], Any]] = [
        lambda: search_r1.compute_score(text, GOLD, **{option: value}),
        lambda: search_r1.compute_score_subem(text, GOLD, **{option: value}),
    ]
    for router in (
        reward_plugins.compute_score,
        reward_plugins.compute_score_subem,
        reward_plugins.compute_score_f1,
    ):
        calls.append(lambda router=router: router("searchR1_nq", text, GOLD, **{option: value}))
    for call in calls:
        with pytest.raises(error, match=option):
            call()


ROUTER_BAD_VALUES: list[tuple[str, Any]] = [
    ("format_score", "abc"),
    ("format_score", "0.1"),
    ("format_score", None),
    ("score", "1"),
    ("score", None),
    ("penalize_subem", "yes"),
    ("penalize_subem", "false"),  # truthy: would silently turn the penalty on
]


@pytest.mark.parametrize(("option", "value"), ROUTER_BAD_VALUES)
def test_router_refuses_non_numeric_scores(option: str, value: Any) -> None:
    """A router result is numeric, so a non-numeric reward option from ``reward_kwargs`` is a
    configuration error on every call, not a silent success until some branch converts it.

    (The verl-compatible plugin functions pass ``format_score``/``score`` through untouched, as
    verl does, so this is checked on the routers only.)
    """
    routers = [reward_plugins.compute_score_subem]
    if option != "penalize_subem":
        routers += [reward_plugins.compute_score, reward_plugins.compute_score_f1]
    for router in routers:
        for response in ("none", "wrong", "correct"):
            with pytest.raises((TypeError, ValueError), match=option):
                router("searchR1_nq", RESPONSES[response], GOLD, **{option: value})


def test_plugin_passes_score_types_through() -> None:
    """verl returns format_score/score as given; so do the plugin functions."""
    assert search_r1.compute_score(RESPONSES["wrong"], GOLD, format_score="n/a") == "n/a"
    assert search_r1.compute_score(RESPONSES["correct"], GOLD, score=True) is True
    assert type(search_r1.compute_score(RESPONSES["wrong"], GOLD, format_score=0)) is int
