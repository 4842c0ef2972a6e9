"""verl's call shapes of the QA rewards live in one module, re-exported under verl's names."""

from __future__ import annotations

import warnings

import reward_plugins
from reward_plugins import router
from reward_plugins.plugins import search_r1, verl_compat


def test_search_r1_reexports_the_verl_shapes_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("compute_score", "compute_score_subem", "compute_score_f1"):
            assert getattr(search_r1, name) is getattr(verl_compat, name)
        assert search_r1.compute_score_format is verl_compat.compute_score_format
        assert verl_compat.compute_score_batch is router.compute_score_batch
        assert verl_compat.compute_score_batch is reward_plugins.compute_score_batch


def test_verl_shape_and_registered_scorer_agree() -> None:
    response = "<answer> Paris </answer>"
    assert verl_compat.compute_score(response, ["paris"], "strict", 0.1, 2.0) == 2.0
    routed = reward_plugins.compute_score("searchR1_nq", response, ["paris"], score=2.0)
    assert routed["score"] == 2.0
    assert verl_compat.compute_score("<answer>x</answer>", ["paris"], format_score=0.1) == 0.1
    assert verl_compat.compute_score("no answer", ["paris"]) == 0
