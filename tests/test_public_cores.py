"""Public cores: the QA core that every QA-style scorer shares, the metrics' n-gram helpers, the
metric free functions whose options their classes declare, and generic layers (adapters, the
engine, the verl config reader) that know no plugin."""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import reward_plugins
from reward_plugins.errors import InvalidOption
from reward_plugins.metrics.dispatch import METRICS
from reward_plugins.options import declared_options
from reward_plugins.plugins import qa_core, search_r1, tool_agent
from reward_plugins.registry import registrations_named

PACKAGE = Path(reward_plugins.__file__).parent
# The package exports functions named like these modules: import the modules themselves.
bleu_module = importlib.import_module("reward_plugins.metrics.bleu")
chrf_module = importlib.import_module("reward_plugins.metrics.chrf")
qa_module = importlib.import_module("reward_plugins.metrics.qa")
rouge_module = importlib.import_module("reward_plugins.metrics.rouge")


def imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from reward_plugins... import name`` in ``path``, and
    ``(module, "")`` for every ``import reward_plugins...``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reward_plugins"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("reward_plugins")]
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    private = [
        f"{path.relative_to(PACKAGE)}: {module}.{name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for module, name in imports(path)
        if name.startswith("_")
        and not name.startswith("__")
        and module != "reward_plugins._speedups"  # the compiled twins, imported by name
    ]
    assert private == []


@pytest.mark.parametrize("layer", ["adapters", "rescore", "verl_config.py", "router.py"])
def test_generic_layers_import_no_plugin(layer: str) -> None:
    paths = [PACKAGE / layer] if layer.endswith(".py") else sorted((PACKAGE / layer).rglob("*.py"))
    assert paths
    plugin_imports = [
        f"{path.relative_to(PACKAGE)}: {module}"
        for path in paths
        for module, name in imports(path)
        if module.startswith("reward_plugins.plugins")
        or (module == "reward_plugins" and name == "plugins")
    ]
    assert plugin_imports == []


def test_verl_config_does_not_depend_on_the_engine() -> None:
    modules = [module for module, _ in imports(PACKAGE / "verl_config.py")]
    assert modules and not [m for m in modules if m.startswith("reward_plugins.rescore")]


def test_qa_core_docstring_examples() -> None:
    failed, attempted = doctest.testmod(qa_core)
    assert attempted > 0
    assert failed == 0


def test_search_r1_and_the_tool_scorer_share_the_qa_core() -> None:
    assert search_r1.retrieval_hit is qa_core.retrieval_hit is tool_agent.retrieval_hit
    assert search_r1.DEFAULT_SPAM_FACTOR == qa_core.DEFAULT_SPAM_FACTOR == 0.25
    assert search_r1.DEFAULT_MAX_ANSWER_TAGS == qa_core.DEFAULT_MAX_ANSWER_TAGS == 10
    qa_options = list(declared_options(qa_core.QAOptions))
    for name in ("compute_score", "compute_score_f1", "compute_score_tool"):
        (registration,) = registrations_named(name)
        assert list(registration.options)[: len(qa_options)] == qa_options
    # One response, one decision table: the tool scorer on a single-turn response is EM.
    response = "<answer> Paris </answer>" * 11
    em = search_r1.score_em(response, ("paris",))
    tool = tool_agent.score_tool(response, ("paris",))
    assert em["score"] == tool["score"] == 0.25
    assert {key: tool[key] for key in search_r1.QA_RESULT_KEYS} == em


def test_qa_result_has_the_qa_keys_in_order() -> None:
    outcome = qa_core.qa_outcome("subem", "<answer> in Paris </answer>", ("paris",))
    result = qa_core.qa_result(outcome, outcome.paid_match)
    assert tuple(result) == search_r1.QA_RESULT_KEYS
    assert result["score"] == result["acc"] == result["subem"] == 1.0
    assert result["em"] == 0.0 and result["answer_tags"] == 1


def test_cached_metric_is_built_once_per_option_set() -> None:
    first = qa_core.cached_metric("rouge_l", {"measure": "p"})
    assert qa_core.cached_metric("rouge_l", {"measure": "p"}) is first
    assert qa_core.cached_metric("rouge_l", None) is not first
    with pytest.raises(InvalidOption, match="rouge_l: unknown measure 'x'"):
        qa_core.cached_metric("rouge_l", {"measure": "x"})


def test_search_r1_keeps_verls_signatures() -> None:
    verl = pytest.importorskip("verl.utils.reward_score.search_r1_like_qa_em")
    for name in (  # normalize_answer is the SQuAD normalizer, its one argument named "text"
        "em_check",
        "subem_check",
        "extract_solution",
        "count_answer_tags",
        "compute_score",
        "compute_score_subem",
    ):
        theirs = inspect.signature(getattr(verl, name)).parameters.values()
        ours = list(inspect.signature(getattr(search_r1, name)).parameters.values())
        assert [(p.name, p.kind, p.default) for p in ours[: len(theirs)]] == [
            (p.name, p.kind, p.default) for p in theirs
        ], name
        assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in ours[len(theirs) :]), name


# ------------------------------------------------------------------ metric free functions
FREE_FUNCTIONS = [
    (qa_module.exact_match, "exact_match"),
    (qa_module.subem, "subem"),
    (qa_module.f1, "f1"),
    (rouge_module.rouge_n, "rouge_n"),
    (rouge_module.rouge_1, "rouge_1"),
    (rouge_module.rouge_2, "rouge_2"),
    (rouge_module.rouge_l, "rouge_l"),
    (rouge_module.rouge_lsum, "rouge_lsum"),
    (chrf_module.chrf, "chrf"),
    (chrf_module.corpus_chrf, "chrf"),
    (bleu_module.bleu, "bleu"),
    (bleu_module.bleu_4, "bleu_4"),
    (bleu_module.corpus_bleu, "bleu"),
]


@pytest.mark.parametrize(("function", "metric"), FREE_FUNCTIONS)
def test_free_function_options_are_its_metric_class_options(function, metric: str) -> None:
    """The options are declared once, on the class; the free function carries them as its
    ``option_specs`` (no signature is rewritten)."""
    signature = inspect.signature(function)
    inputs = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    corpus = function.__name__.startswith("corpus_")
    assert inputs == (["predictions", "references"] if corpus else ["prediction", "targets"])
    declared = dict(METRICS[metric].option_specs)
    assert list(declared) == [
        p.name
        for p in inspect.signature(METRICS[metric]).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    ]
    if function is bleu_module.corpus_bleu:  # sacrebleu's corpus BLEU: no effective order
        declared["effective_order"] = dataclasses.replace(
            declared["effective_order"], default=False
        )
    assert dict(function.option_specs) == declared
    assert signature.return_annotation == "float"
    assert function.__doc__ and function.__module__ == METRICS[metric].__module__


@pytest.mark.parametrize(("function", "metric"), FREE_FUNCTIONS)
def test_free_function_option_errors_name_the_metric(function, metric: str) -> None:
    corpus = function.__name__.startswith("corpus_")
    inputs = (["a b"], [["a c"]]) if corpus else ("a b", ["a c"])
    option = next(iter(function.option_specs.values()))
    shown = "bleu_4" if function is bleu_module.corpus_bleu else metric  # the order-4 metric
    with pytest.raises(InvalidOption, match=f"^{shown}: ") as error:
        function(*inputs, **{option.name: object()})
    assert option.name in str(error.value) or "unknown" in str(error.value)
    with pytest.raises(TypeError):
        function(*inputs, not_an_option=1)


@pytest.mark.parametrize(
    ("function", "options"),
    [
        (rouge_module.rouge_n, {"n": 2, "measure": "p"}),
        (chrf_module.chrf, {"word_order": 2}),
        (bleu_module.bleu, {"max_ngram_order": 2, "compat": "sacrebleu", "tokenize": "char"}),
        (qa_module.f1, {"compat": "squad"}),
    ],
)
def test_free_function_equals_its_metric(function, options: dict) -> None:
    name = function.__name__
    prediction, targets = "the cat sat on the mat", ["a cat sat on the mat", "dog"]
    assert function(prediction, targets, **options) == METRICS[name](**options)(prediction, targets)


def test_corpus_bleu_defaults_and_orders() -> None:
    predictions, references = ["the cat sat on the mat", "hello"], [["the cat sat"], ["hello"]]
    plain = bleu_module.corpus_bleu(predictions, references)
    assert plain == METRICS["bleu_4"](effective_order=False).corpus_score(predictions, references)
    assert bleu_module.corpus_bleu(predictions, references, max_ngram_order=4) == plain
    order_2 = bleu_module.corpus_bleu(predictions, references, max_ngram_order=2)
    assert order_2 == METRICS["bleu"](max_ngram_order=2, effective_order=False).corpus_score(
        predictions, references
    )
    assert order_2 != plain
    with pytest.raises(InvalidOption, match=r"^bleu: option 'max_ngram_order' must be an int"):
        bleu_module.corpus_bleu(predictions, references, max_ngram_order=4.0)


@pytest.mark.parametrize("module", ["reward_plugins.metrics.ngrams", "reward_plugins.metrics.base"])
def test_shared_helper_docstring_examples(module: str) -> None:
    failed, attempted = doctest.testmod(importlib.import_module(module))
    assert attempted > 0
    assert failed == 0
