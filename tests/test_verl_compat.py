"""verl's call shapes of the QA rewards live in one module, re-exported under verl's names."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Annotated

import reward_plugins
from reward_plugins import router
from reward_plugins.plugins import search_r1, verl_compat


def test_search_r1_reexports_the_verl_shapes_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("compute_score", "compute_score_subem", "compute_score_f1"):
            assert getattr(search_r1, name) is getattr(verl_compat, name)
        assert search_r1.compute_score_format is verl_compat.compute_score_format
        assert reward_plugins.compute_score_batch is router.compute_score_batch


def test_verl_shape_and_registered_scorer_agree() -> None:
    response = "<answer> Paris </answer>"
    assert verl_compat.compute_score(response, ["paris"], "strict", 0.1, 2.0) == 2.0
    routed = reward_plugins.compute_score("searchR1_nq", response, ["paris"], score=2.0)
    assert routed["score"] == 2.0
    assert verl_compat.compute_score("<answer>x</answer>", ["paris"], format_score=0.1) == 0.1
    assert verl_compat.compute_score("no answer", ["paris"]) == 0


def test_the_qa_declaration_replaces_with_options() -> None:
    import dataclasses

    import pytest

    from reward_plugins.options import declared_options
    from reward_plugins.plugins import qa_core
    from reward_plugins.registry import Registry

    specs = declared_options(qa_core.QAOptions)
    assert specs["spam_factor"].default == 0.25
    assert specs["spam_factor"].expected == "a finite number in [0, 1]"
    assert specs["spam_factor"].doc == "multiplies a spammed match's reward"
    assert dataclasses.is_dataclass(qa_core.QAOptions)
    with pytest.warns(DeprecationWarning):
        names = [parameter.name for parameter in qa_core.QA_PARAMETERS]
    assert names == list(specs)
    registry = Registry(builtin_plugins=(), entry_point_group="rp_test_no_plugins")
    with pytest.warns(DeprecationWarning):
        decorate = qa_core.with_options(qa_core.keyword("bonus", 0.0, float))

    @registry.scorer("old_style", "old_source")
    @decorate
    def old_style(solution_str: str, golds: tuple[str, ...], **options: object) -> float:
        return 0.0

    assert list(registry.lookup("old_source", "old_style").options) == [*specs, "bonus"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BonusOptions:
    bonus: Annotated[float, "added"] = 0.5


def test_a_declared_scorer_keeps_the_declarations_defaults() -> None:
    import pytest

    from reward_plugins import PluginError
    from reward_plugins.registry import Registry

    registry = Registry(builtin_plugins=(), entry_point_group="rp_test_no_plugins")
    with pytest.raises(PluginError, match=r"default of parameter\(s\) bonus differs"):

        @registry.scorer("rp_differs", "rp_source", options=BonusOptions)
        def differs(response: str, golds: tuple[str, ...], *, bonus: float = 1.0) -> float:
            return bonus

    with pytest.raises(PluginError, match=r"parameter\(s\) other are not fields"):

        @registry.scorer("rp_undeclared", "rp_source", options=BonusOptions)
        def undeclared(response: str, golds: tuple[str, ...], *, other: int = 1) -> float:
            return 0.0
