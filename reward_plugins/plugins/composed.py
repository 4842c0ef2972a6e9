"""Composed rewards: registered scorers combined by weight, configured as data.

``compute_score_composed`` serves every data source. Its options name the components, inline
(``components``) or through a recipe file (``recipe``: a shipped recipe's name or a YAML path)::

    combine: sum            # sum (default), product or min
    scale: 1.0              # the combined value is multiplied by it
    components:
      - scorer: compute_score         # any registered scorer, a shaping term, even a composition
        weight: 1.0                   # required; negative allowed; 0 logs without paying
        as: em                        # the prefix of its keys (default: the scorer's name)
        primary: true                 # its acc is the result's acc (default: the first component)
        format_score: 0.1             # every other key is an option of that scorer

The reward is ``scale * sum(weight * score)`` over the components with a non-zero weight, or
``scale *`` the product or the minimum of their scores. The result holds ``score``, ``acc`` and
every key of every component prefixed ``<as>_`` (its score as ``<as>_score``): the same keys on
every call. A recipe is checked whole (scorers, their options, weights, prefixes, recipe
cycles) when the option set is first bound, before any sample is scored.

The combination modes follow the usual recipe designs: TRL's ``reward_funcs`` with
``reward_weights`` (a weighted sum, github.com/huggingface/trl ``trl/trainer/grpo_trainer.py``)
and the weighted rubrics of PrimeIntellect's verifiers (github.com/PrimeIntellect-ai/verifiers),
where a zero weight keeps a metric in the logs only.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reward_plugins.cache import RECIPE_BINDINGS, RECIPES, BoundedCache
from reward_plugins.config_reader import ConfigFileError, describe_source, read_config_file
from reward_plugins.errors import InvalidOption, PluginError, RewardPluginsError
from reward_plugins.options import SCORE_LIMIT, Range, Score, describe_value, finite_number, freeze
from reward_plugins.registry import WILDCARD, Bound, lookup, registrations_named, scorer
from reward_plugins.results import ResultKey, Schema, check_schema, union

NAME = "compute_score_composed"
COMBINE_MODES = ("sum", "product", "min")
COMPONENT_KEYS = ("scorer", "weight", "as", "primary")
"""The keys of a component that are not options of its scorer."""
RECIPE_KEYS = ("components", "combine", "scale", "description")
RECIPE_DIRECTORY = Path(__file__).resolve().parent.parent / "data" / "recipes"
"""Where the shipped recipes live; ``recipe: NAME`` reads ``NAME.yaml`` from here."""
MAX_NESTING = 8
WEIGHT_RANGE = Range(-SCORE_LIMIT, SCORE_LIMIT)
"""The range of a component's ``weight`` and of a recipe's ``scale``: ``[-1e6, 1e6]``."""
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Component:
    """One scorer of a recipe, its weight and the prefix of its keys."""

    scorer: str
    weight: float
    prefix: str
    primary: bool
    options: Mapping[str, Any]

    @property
    def paid(self) -> bool:
        """Whether its score counts in the reward (a zero weight only logs it)."""
        return self.weight != 0


@dataclass(eq=False)
class Recipe:
    """A checked recipe: components, how they combine, and the scorers bound per data source."""

    components: tuple[Component, ...]
    combine: str
    scale: float
    origin: str
    """Where it came from, for messages: ``components`` or the recipe's name or path."""
    description: str = ""
    _bound: BoundedCache[str, tuple[Bound, ...]] = field(
        default_factory=lambda: BoundedCache(RECIPE_BINDINGS), repr=False
    )
    _results: Schema | None = field(default=None, repr=False)

    @property
    def primary(self) -> int:
        """The index of the component whose ``acc`` is the result's."""
        return next((i for i, c in enumerate(self.components) if c.primary), 0)

    def results(self) -> Schema:
        """The result schema: ``score``, ``acc`` (as the primary component declares it), then
        every component's declared keys prefixed ``<as>_``, labelled ``<as> <label>``.

        A component's ``score`` becomes ``<as>_score``, a ``component``; it is the only key GDPO
        may weigh, and only for a paid component (the combined ``score`` restates them, the
        other keys are the components' own details). A component whose scorer has several
        registrations (one per data source) declares the union of their schemas.

        Raises:
            PluginError: a component's schema breaks the contract, or two prefixed keys
                collide.
        """
        if self._results is None:
            schemas = [
                union(r.bind(c.options).results for r in registrations_named(c.scorer))
                for c in self.components
            ]
            declared = {item.key: item for item in schemas[self.primary]}.get("acc")
            items = [
                ResultKey("score", "reward", "score"),
                ResultKey("acc", "component", "acc")
                if declared is None
                else ResultKey("acc", declared.kind, declared.label),
            ]
            for component, schema in zip(self.components, schemas, strict=True):
                for item in schema:
                    key, label = (
                        f"{component.prefix}_{item.key}",
                        f"{component.prefix} {item.label}",
                    )
                    if item.key == "score":
                        items.append(ResultKey(key, "component", label, gdpo=component.paid))
                    else:
                        items.append(ResultKey(key, item.kind, label))
            self._results = check_schema(f"{NAME} ({self.origin})", items)
        return self._results

    def gdpo_overrides(self) -> list[str]:
        """verl overrides that give GDPO the keys it may weigh (:meth:`results`: the paid
        components' scores) and their weights.

        Example:
            >>> recipe = load_recipe("search_r1_shaped")
            >>> print("\\n".join(recipe.gdpo_overrides()))
            +algorithm.gdpo_reward_keys=[em_score,length_score,answer_list_score]
            +algorithm.gdpo_reward_weights=[1.0,1.0,1.0]
        """
        weight_of = {f"{c.prefix}_score": float(c.weight) for c in self.components}
        dimensions = [item.key for item in self.results() if item.gdpo]
        keys = ",".join(dimensions)
        weights = ",".join(repr(weight_of[key]) for key in dimensions)
        return [
            f"+algorithm.gdpo_reward_keys=[{keys}]",
            f"+algorithm.gdpo_reward_weights=[{weights}]",
        ]

    def bound_for(self, data_source: str) -> tuple[Bound, ...]:
        """The components' scorers for ``data_source``, options bound (cached).

        Raises:
            InvalidOption: a component's scorer does not serve ``data_source``.
        """
        bound = self._bound.get(data_source)
        if bound is None:
            bound = tuple(
                _component_call(
                    index, component, lambda c: lookup(data_source, c.scorer), self.origin
                ).bind(component.options)
                for index, component in enumerate(self.components)
            )
            self._bound[data_source] = bound
        return bound

    def combined(self, scores: Sequence[float]) -> float:
        """The reward from the components' scores, in component order."""
        paid = [s for s, c in zip(scores, self.components, strict=True) if c.paid]
        if self.combine == "product":
            value = math.prod(paid)
        elif self.combine == "min":
            value = min(paid)
        else:
            value = 0.0
            for score, component in zip(scores, self.components, strict=True):
                if component.paid:
                    value += component.weight * score
        return value if self.scale == 1 else self.scale * value


def _component_call(index: int, component: Component, call: Any, origin: str) -> Any:
    """``call(component)``, with any error of ours naming the recipe and the component."""
    try:
        return call(component)
    except RewardPluginsError as error:
        where = _describe(index, component.scorer, component.prefix)
        raise InvalidOption(f"{origin}: {where}: {error}") from None


def _describe(index: int, name: object, prefix: object = None) -> str:
    label = f"component {index + 1} ({_shown(name, quote=False)}"
    return f"{label}, as {_shown(prefix)})" if prefix not in (None, name) else f"{label})"


def _shown(value: object, quote: bool = True) -> str:
    """A name or value for a message: a string escaped and cut (a name can be 100 KB long),
    anything else by :func:`describe_value`."""
    if isinstance(value, str):
        shown = describe_source(value)
        return f"'{shown}'" if quote else shown
    return describe_value(value)


# ------------------------------------------------------------------------------ building


_loading = threading.local()
"""``stack``: the recipe files being read by this thread, outermost first (cycle detection)."""


def load_recipe(recipe: str) -> Recipe:
    """The recipe named ``recipe`` (a shipped one) or stored at that path (``.yaml``/``.yml``,
    or any value with a path separator), checked.

    Example:
        >>> [c.prefix for c in load_recipe("search_r1_em").components]
        ['em']

    Raises:
        InvalidOption: no such recipe, a file that cannot be read (the reasons of
            :func:`reward_plugins.config_reader.read_config_file`: not a regular file, too
            large, not YAML, over a limit of the reader), or a recipe that fails the checks of
            :func:`build_recipe` (the message names the recipe and the component).
    """
    path = recipe_path(recipe)
    name = _shown(recipe)
    shown_path = describe_source(str(path.absolute()))
    where = (
        name
        if path.parent == RECIPE_DIRECTORY or shown_path == recipe
        else f"{name} ({shown_path})"
    )
    stack: list[Path] = getattr(_loading, "stack", [])
    identity = path.resolve()  # one file however it is spelled (sub/../r.yaml, links)
    if identity in stack:
        chain = " -> ".join(str(p) for p in (*stack, identity))
        raise InvalidOption(f"recipe {name}: a recipe includes itself: {chain}")
    if len(stack) >= MAX_NESTING:
        raise InvalidOption(f"recipe {name}: recipes nest more than {MAX_NESTING} deep")
    data = _read_recipe_file(path)
    if not isinstance(data, Mapping):
        raise InvalidOption(
            f"recipe {where}: must be a mapping with 'components', got {type(data).__name__}"
        )
    unknown = sorted(_shown(key, quote=False) for key in data if key not in RECIPE_KEYS)
    if unknown:
        raise InvalidOption(
            f"recipe {where}: unknown key(s) {', '.join(unknown)}; valid keys: "
            f"{', '.join(RECIPE_KEYS)}"
        )
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise InvalidOption(
            f"recipe {where}: description must be a string, got {describe_value(description)}"
        )
    _loading.stack = [*stack, identity]
    try:
        built = build_recipe(
            data.get("components"),
            data.get("combine", "sum"),
            data.get("scale", 1.0),
            describe_source(recipe),
        )
    finally:
        _loading.stack = stack
    built.description = description
    return built


def recipe_path(recipe: str) -> Path:
    """The file of a recipe name (a shipped recipe) or path (ending in ``.yaml``/``.yml`` or
    holding a path separator; relative to the current directory), not yet read.

    Raises:
        InvalidOption: a name that is no shipped recipe.
    """
    if recipe.endswith((".yaml", ".yml")) or "/" in recipe or "\\" in recipe:
        return Path(recipe).expanduser()
    shipped = shipped_recipes()
    if recipe not in shipped:  # compared by name: a 100 KB name never reaches the file system
        raise InvalidOption(
            f"recipe {_shown(recipe)}: no shipped recipe of that name (shipped: "
            f"{', '.join(shipped)}); a recipe file is named by a path ending in .yaml"
        )
    return RECIPE_DIRECTORY / f"{recipe}.yaml"


def shipped_recipes() -> tuple[str, ...]:
    """The names of the recipes that ship with the package."""
    return tuple(sorted(path.stem for path in RECIPE_DIRECTORY.glob("*.yaml")))


def _read_recipe_file(path: Path) -> Any:
    """The YAML of a recipe file, read by the package's bounded reader.

    Raises:
        InvalidOption: the reader's :class:`ConfigFileError`, and for a relative path that does
            not exist, the directory it was looked for in.
    """
    try:
        return read_config_file(path, what="recipe")
    except ConfigFileError as error:
        message = str(error)
        if not path.is_absolute() and not os.path.lexists(path):
            message += (
                "; a relative recipe path is read from the current directory, "
                f"{describe_source(os.getcwd())}"
            )
        raise InvalidOption(message) from None


def build_recipe(components: Any, combine: Any, scale: Any, origin: str) -> Recipe:
    """A checked :class:`Recipe` from its parts (plain data, or verl's OmegaConf containers).

    Raises:
        InvalidOption: no components; a component that is not a mapping, names no registered
            scorer, lacks a number ``weight``, has a bad ``as`` or ``primary``, or options its
            scorer refuses; two components with the same prefix; several primaries; a combine
            mode other than sum, product and min; no component with a non-zero weight.
    """
    if combine not in COMBINE_MODES:
        raise InvalidOption(
            f"{origin}: combine must be one of {', '.join(COMBINE_MODES)}, got "
            f"{describe_value(combine)}"
        )
    finite_number(scale, f"{origin}: scale", WEIGHT_RANGE)
    if isinstance(components, (str, bytes)) or not isinstance(components, Sequence):
        raise InvalidOption(
            f"{origin}: components must be a list of mappings, got {type(components).__name__}"
        )
    if not components:
        raise InvalidOption(f"{origin}: components is empty; give at least one component")
    built = tuple(_component(index, item, origin) for index, item in enumerate(_plain(components)))
    _check_together(built, origin)
    recipe = Recipe(built, combine, float(scale), origin)
    for index, component in enumerate(built):  # checks options against every registration
        registrations = _component_call(
            index, component, lambda c: registrations_named(c.scorer), origin
        )
        for registration in registrations:
            _component_call(index, component, lambda c, r=registration: r.bind(c.options), origin)
    return recipe


def _component(index: int, item: Any, origin: str) -> Component:
    where = (
        f"{origin}: {_describe(index, item.get('scorer') if isinstance(item, Mapping) else '?')}"
    )
    if not isinstance(item, Mapping):
        raise InvalidOption(
            f"{where}: must be a mapping with 'scorer' and 'weight', got {type(item).__name__}"
        )
    name = item.get("scorer")
    if not isinstance(name, str):
        raise InvalidOption(
            f"{where}: 'scorer' must name a registered scorer, got {describe_value(name)}"
        )
    if "weight" not in item:
        raise InvalidOption(f"{where}: 'weight' is missing (0 logs the component unpaid)")
    weight = finite_number(item["weight"], f"{where}: 'weight'", WEIGHT_RANGE)
    prefix = item.get("as", name)
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise InvalidOption(
            f"{where}: 'as' must be an identifier (letters, digits, _), got "
            f"{describe_value(prefix)}"
        )
    primary = item.get("primary", False)
    if type(primary) is not bool:
        raise InvalidOption(f"{where}: 'primary' must be a bool, got {describe_value(primary)}")
    options = {key: value for key, value in item.items() if key not in COMPONENT_KEYS}
    return Component(name, weight, prefix, primary, options)


def _check_together(components: tuple[Component, ...], origin: str) -> None:
    seen: dict[str, int] = {}
    for index, component in enumerate(components):
        if component.prefix in seen:
            first = seen[component.prefix]
            raise InvalidOption(
                f"{origin}: {_describe(index, component.scorer, component.prefix)} has the "
                f"prefix {component.prefix!r} of component {first + 1}; give one of them "
                "another 'as'"
            )
        seen[component.prefix] = index
    primaries = [i + 1 for i, c in enumerate(components) if c.primary]
    if len(primaries) > 1:
        raise InvalidOption(
            f"{origin}: components {', '.join(map(str, primaries))} are all marked primary; "
            "mark one"
        )
    if not any(c.paid for c in components):
        raise InvalidOption(f"{origin}: every weight is 0; at least one component must be paid")


def _plain(value: Any) -> Any:
    """``value`` with mappings as dicts and sequences as lists, all the way down (verl passes
    OmegaConf containers)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(item) for item in value]
    return value


# ----------------------------------------------------------------------------- the scorer


_recipes: BoundedCache[Any, Recipe] = BoundedCache(RECIPES)
"""Built recipes by option set, so each call finds its recipe without rebuilding it."""
_by_identity: BoundedCache[int, tuple[Any, Recipe]] = BoundedCache(RECIPES)
"""The same, by the identity of the bound ``components`` object (each call passes the same)."""


def recipe_of(
    components: Any = None, recipe: Any = None, combine: Any = None, scale: Any = None
) -> Recipe:
    """The recipe that the options of ``compute_score_composed`` describe (cached).

    Raises:
        InvalidOption: neither or both of ``components`` and ``recipe``; ``combine`` or
            ``scale`` beside a recipe file (the file says them); an invalid recipe.
    """
    source = components if components is not None else recipe
    cached = _by_identity.get(id(source))
    if cached is not None and cached[0] is source and source is not None:
        found = cached[1]
        if combine in (None, found.combine) and scale in (None, found.scale):
            return found
    key = freeze((components, recipe, combine, scale))
    built = _recipes.get(key)
    if built is None:
        built = _build(components, recipe, combine, scale)
        _recipes[key] = built
    _by_identity[id(source)] = (source, built)
    return built


def _build(components: Any, recipe: Any, combine: Any, scale: Any) -> Recipe:
    if (components is None) == (recipe is None):
        raise InvalidOption(
            "give either 'components' (a list of {scorer, weight, as, options...}) or "
            f"'recipe' (a shipped recipe name: {', '.join(shipped_recipes())}, or a YAML path)"
            + ("" if components is None else ", not both")
        )
    if recipe is not None:
        fixed = [
            name for name, value in (("combine", combine), ("scale", scale)) if value is not None
        ]
        if fixed:
            raise InvalidOption(
                f"{', '.join(fixed)} given beside recipe {_shown(recipe)}: the recipe file sets "
                f"{'it' if len(fixed) == 1 else 'them'}"
            )
        return load_recipe(recipe)
    return build_recipe(
        components,
        "sum" if combine is None else combine,
        1.0 if scale is None else scale,
        "components",
    )


def _validate(options: Mapping[str, Any]) -> None:
    recipe_of(options["components"], options["recipe"], options["combine"], options["scale"])


def _results(options: Mapping[str, Any]) -> Schema:
    """The schema of a recipe's result (:meth:`Recipe.results`)."""
    return recipe_of(
        options["components"], options["recipe"], options["combine"], options["scale"]
    ).results()


@scorer(NAME, WILDCARD, ground_truth="raw", validate=_validate, results=_results)
def score_composed(
    solution_str: str,
    ground_truth: Any,
    *,
    components: Sequence[Mapping[str, Any]] | None = None,
    recipe: str | None = None,
    combine: Literal["sum", "product", "min"] | None = None,
    scale: Score | None = None,
    data_source: str,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Registered scorers combined by weight; see the module docstring for the recipe format.

    Every component scores the same response, ground truth, data source and ``extra_info``
    through its own registration (its own ground-truth form and option checks).

    Raises:
        InvalidOption: an invalid recipe (at bind time, before any sample), or a component
            whose scorer does not serve ``data_source``.
        PluginError: two components' prefixed keys collide.
    """
    plan = recipe_of(components, recipe, combine, scale)
    results = [
        bound(solution_str, ground_truth, data_source, extra_info)
        for bound in plan.bound_for(data_source)
    ]
    scores = [result["score"] for result in results]
    primary = results[plan.primary]
    combined: dict[str, Any] = {
        "score": plan.combined(scores),
        "acc": primary.get("acc", primary["score"]),
    }
    for component, result in zip(plan.components, results, strict=True):
        for key, value in result.items():
            combined[f"{component.prefix}_{key}"] = value
    expected = 2 + sum(len(result) for result in results)
    if len(combined) != expected:
        raise PluginError(_collision(plan, results))
    return combined


def _collision(plan: Recipe, results: list[dict[str, Any]]) -> str:
    owners: dict[str, int] = {}
    for index, (component, result) in enumerate(zip(plan.components, results, strict=True)):
        for key in result:
            name = f"{component.prefix}_{key}"
            if name in owners:
                first = plan.components[owners[name]]
                return (
                    f"{NAME} ({plan.origin}): key {name!r} of "
                    f"{_describe(index, component.scorer, component.prefix)} collides with "
                    f"component {owners[name] + 1} ({first.scorer}, as {first.prefix!r}); "
                    "rename one with 'as'"
                )
            owners[name] = index
    return f"{NAME} ({plan.origin}): component keys collide"
