"""docs/serving.md's tables are the code's: the ``serve-rewards`` options (written from the
command's own parser) and the verl client's ``remote_*`` settings (every field of
``ClientSettings``, with its default). A table that drifts fails here with the text to paste."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from reward_plugins import cli
from reward_plugins.serve.client import ClientSettings

SERVING_DOC = Path(__file__).resolve().parents[1] / "docs" / "serving.md"


def section(name: str) -> str:
    """The text between ``<!-- name -->`` and ``<!-- /name -->`` of the page."""
    page = SERVING_DOC.read_text(encoding="utf-8")
    start, end = f"<!-- {name} -->\n", f"<!-- /{name} -->"
    assert start in page and end in page, f"docs/serving.md lacks the {name} markers"
    return page.split(start, 1)[1].split(end, 1)[0]


def serve_rewards_parser() -> argparse.ArgumentParser:
    commands = next(
        action
        for action in cli._parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    parser = commands.choices["serve-rewards"]
    for add in parser.later:  # the arguments added when the command is chosen
        add(parser)
    return parser


def options_table() -> str:
    lines = ["| option | default | what it sets |", "| --- | --- | --- |"]
    for action in serve_rewards_parser()._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = max(action.option_strings, key=len)
        shown = action.default is not None and action.default is not False and action.default != []
        default = f"`{action.default}`" if shown else ""
        text = (action.help or "").replace("|", "\\|")
        if shown:  # the help's closing "(default)": the table has a column for it
            text = re.sub(r" \([^()]*\)$", "", text)
        lines.append(f"| `{name}` | {default} | {text} |")
    return "\n".join(lines) + "\n"


def test_the_options_table_is_the_commands() -> None:
    assert section("serve-rewards-options") == options_table(), options_table()


def test_the_client_settings_table_lists_every_setting_with_its_default() -> None:
    rows = [line for line in section("client-settings").splitlines() if line.startswith("| `")]
    listed = [(row.split("`")[1], row.split("`")[3]) for row in rows]
    expected = [
        (f"remote_{spec.name}", str(spec.default)) for spec in dataclasses.fields(ClientSettings)
    ]
    assert listed == expected
