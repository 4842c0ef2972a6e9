"""``--dataset``: each row of a verl dump (no ``data_source`` column) gets the data source of its
prompt in verl's dataset files, so a mixed run is summarized and reported per source.

The dumps are written as verl 0.9.1 writes them: ``input`` is the dataset row's ``prompt``
messages through a real chat template (Qwen2.5's ChatML format, with its default system
message), tokenized with ``add_generation_prompt=True`` and decoded with
``skip_special_tokens=True`` by a real ``transformers`` tokenizer
(``verl/trainer/ppo/ray_trainer.py``, ``_log_rollout_data``), lines through
``json.dumps(..., default=str)`` (``_write_generations``). The datasets are real parquet (and
JSONL) files written here from the package's shipped sample.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_cli_helpers import (
    REPO,
    one_line_error,
    read_jsonl,
    router_result,
    run_cli_here,
    verl_dump_line,
    write_jsonl,
    write_parquet,
)
from verl_helpers import build_tokenizer

from reward_plugins.rescore import datasets

NQ, HOTPOTQA = "searchR1_nq", "searchR1_hotpotqa"
SAMPLE = REPO / "reward_plugins" / "data" / "sample_rollouts.jsonl"

CHATML = (
    "{%- if messages[0].role != 'system' %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""Qwen2.5's template without tools (Hugging Face ``Qwen/Qwen2.5-*-Instruct``,
``tokenizer_config.json``): a default system message, ChatML turns, the assistant header."""

LLAMA3 = (
    "{{- '<|begin_of_text|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + "
    "message.content | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
"""Llama 3's format (``meta-llama/Meta-Llama-3-8B-Instruct``): contents trimmed."""


def _tokenizer(template: str, specials: list[str]) -> Any:
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    tokenizer.chat_template = template
    return tokenizer


@pytest.fixture(scope="module")
def chatml() -> Any:
    return _tokenizer(CHATML, ["<|im_start|>", "<|im_end|>"])


def decoded_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """A dump's ``input`` as verl writes it."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return str(tokenizer.decode(ids, skip_special_tokens=True))


def sample_rows(source: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["data_source"] == source]


def dataset_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as verl's dataset holds them: each prompt once (the sample holds five responses
    to each), without the response."""
    prompts = {json.dumps(row["prompt"]): row for row in reversed(rows)}
    return [{k: v for k, v in row.items() if k != "response"} for row in reversed(prompts.values())]


def dump_entry(tokenizer: Any, row: dict[str, Any], step: int = 1) -> dict[str, Any]:
    truth = row["reward_model"]["ground_truth"]
    return {
        "input": decoded_prompt(tokenizer, row["prompt"]),
        "output": row["response"],
        "gts": {**truth, "target": np.array(truth["target"])},
        "score": 0.0,
        "step": step,
    }


def write_dump(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text("".join(verl_dump_line(entry) + "\n" for entry in entries), encoding="utf-8")
    return path


def write_dataset(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.name.endswith(".parquet"):
        return write_parquet(path, dataset_rows(rows))
    return write_jsonl(path, dataset_rows(rows))


def mixed_run(tmp_path: Path, tokenizer: Any, hotpotqa_format: str = "parquet") -> tuple:
    """NQ and HotpotQA rows shuffled together into one dump, and their two dataset files."""
    nq, hotpotqa = sample_rows(NQ), sample_rows(HOTPOTQA)
    mixed = nq + hotpotqa
    random.Random(7).shuffle(mixed)
    dump = write_dump(tmp_path / "0.jsonl", [dump_entry(tokenizer, row) for row in mixed])
    nq_file = write_dataset(tmp_path / "nq_train.parquet", nq)
    hotpotqa_file = write_dataset(tmp_path / f"hotpotqa_train.{hotpotqa_format}", hotpotqa)
    return dump, nq_file, hotpotqa_file, mixed


@pytest.mark.parametrize("hotpotqa_format", ["parquet", "jsonl"])
def test_a_mixed_dump_is_summarized_per_source(
    tmp_path: Path, chatml: Any, hotpotqa_format: str
) -> None:
    dump, nq_file, hotpotqa_file, mixed = mixed_run(tmp_path, chatml, hotpotqa_format)
    first = read_jsonl(dump)[0]["input"]  # the template applied, its special tokens dropped
    assert first.startswith("system\nYou are a helpful and harmless assistant.\nuser\nAnswer")
    assert first.endswith(
        "</answer>. Question: " + mixed[0]["extra_info"]["question"] + "\nassistant\n"
    )
    summary_file = tmp_path / "summary.json"
    result = run_cli_here(
        "score", dump, "-o", tmp_path / "out.jsonl", "--dataset", nq_file,
        "--dataset", hotpotqa_file, "--summary-json", summary_file, "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    assert {name: group["rows"] for name, group in summary["sources"].items()} == {
        HOTPOTQA: 20,
        NQ: 30,
    }
    assert summary["scored"] == summary["rows"] == 50
    assert summary["datasets"] == {
        "files": [str(nq_file), str(hotpotqa_file)],
        "rows": 10,  # 6 NQ and 4 HotpotQA questions, 5 responses each
        "data_sources": [NQ, HOTPOTQA],
    }
    assert summary["columns"]["data_source"] is None
    # Each row scored under its own source: the router's result for the dataset row.
    output = read_jsonl(tmp_path / "out.jsonl")
    for row, scored in zip(mixed, output, strict=True):
        expected = router_result(row)
        assert {k: scored[f"reward_{k}"] for k in expected} == expected
    nq_mean = np.mean([router_result(row)["score"] for row in mixed if row["data_source"] == NQ])
    assert summary["sources"][NQ]["metrics"]["score"]["mean"] == pytest.approx(nq_mean)
    printed = result.stdout
    assert f"joined on the prompt from --dataset {nq_file}, {hotpotqa_file}" in printed
    table = printed[printed.index("data source  ") :]
    assert [line.split()[:2] for line in table.splitlines() if line[:1] not in (" ", "d")] == [
        [HOTPOTQA, "20"],
        [NQ, "30"],
        ["overall", "50"],
    ]


def test_workers_get_the_mapping(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, hotpotqa_file, _ = mixed_run(tmp_path, chatml)
    outputs = []
    for workers in ("1", "2"):
        output = tmp_path / f"out{workers}.jsonl"
        result = run_cli_here(
            "score", dump, "-o", output, "--dataset", nq_file, "--dataset", hotpotqa_file,
            "--workers", workers, "-q",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        outputs.append(output.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.slow
def test_ray_workers_get_the_mapping(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, hotpotqa_file, _ = mixed_run(tmp_path, chatml)
    summaries = []
    for backend in ("local", "ray"):
        summary_file = tmp_path / f"{backend}.json"
        result = run_cli_here(
            "score", dump, "-o", tmp_path / f"{backend}.jsonl", "--dataset", nq_file,
            "--dataset", hotpotqa_file, "--backend", backend, "--workers", "2", "-q",
            "--summary-json", summary_file,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        summaries.append(json.loads(summary_file.read_text(encoding="utf-8"))["sources"])
    assert summaries[0] == summaries[1] and set(summaries[1]) == {NQ, HOTPOTQA}
    assert (tmp_path / "local.jsonl").read_bytes() == (tmp_path / "ray.jsonl").read_bytes()


def test_the_report_has_one_table_per_source(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, hotpotqa_file, _ = mixed_run(tmp_path, chatml)
    html = tmp_path / "report.html"
    result = run_cli_here(
        "report", dump, "-o", html, "--dataset", nq_file, "--dataset", hotpotqa_file, "-q"
    )
    assert result.returncode == 0, result.stderr
    page = html.read_text(encoding="utf-8")
    section = page[page.index("<section id='sources'>") :]
    section = section[: section.index("</section>")]
    assert f"<h3>{HOTPOTQA}</h3>\n<p>20 rows</p>" in section
    assert f"<h3>{NQ}</h3>\n<p>30 rows</p>" in section


def bad_run(tmp_path: Path, tokenizer: Any) -> tuple[Path, Path, Path]:
    """A dump whose line 2 has a prompt in no dataset, line 3 another ground truth than its
    dataset row, line 4 no ``input``, line 5 a prompt both datasets hold under two sources."""
    nq, hotpotqa = dataset_rows(sample_rows(NQ)), dataset_rows(sample_rows(HOTPOTQA))
    nq = [{**row, "response": "<answer>x</answer>"} for row in nq]
    hotpotqa = [{**row, "response": "<answer>x</answer>"} for row in hotpotqa]
    shared = {**hotpotqa[0], "data_source": NQ}  # the same question under NQ
    entries = [dump_entry(tokenizer, row) for row in (nq[0], nq[1], nq[2], nq[3], hotpotqa[0])]
    entries[1]["input"] = entries[1]["input"].replace("Question:", "Query:")
    entries[2]["gts"] = {"target": np.array(["Somebody Else"])}
    del entries[3]["input"]
    dump = write_dump(tmp_path / "0.jsonl", entries)
    nq_file = write_dataset(tmp_path / "nq.parquet", [*nq, shared])
    hotpotqa_file = write_dataset(tmp_path / "hotpotqa.parquet", hotpotqa)
    return dump, nq_file, hotpotqa_file


def test_rows_that_do_not_join_are_named_and_counted(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, hotpotqa_file = bad_run(tmp_path, chatml)
    output = tmp_path / "out.jsonl"
    summary_file = tmp_path / "summary.json"
    result = run_cli_here(
        "score", dump, "-o", output, "--dataset", nq_file, "--dataset", hotpotqa_file,
        "--on-error", "skip", "--summary-json", summary_file, "-q",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    assert summary["rows"] == 5 and summary["scored"] == 1
    assert summary["skipped"]["reasons"] == {
        "prompt not in dataset": 1,
        "ground truth differs from dataset": 1,
        "missing prompt": 1,
        "ambiguous prompt": 1,
    }
    assert summary["sources"] == {NQ: summary["overall"]} and summary["overall"]["rows"] == 1
    failures = read_jsonl(Path(f"{output}.failures.jsonl"))
    assert [(f["file"], f["line"], f["reason"]) for f in failures] == [
        (str(dump), 2, "prompt not in dataset"),
        (str(dump), 3, "ground truth differs from dataset"),
        (str(dump), 4, "missing prompt"),
        (str(dump), 5, "ambiguous prompt"),
    ]
    assert f"{nq_file} row 3" in failures[1]["detail"]  # the dataset row it was checked against
    assert (
        f"several data sources: {NQ} ({nq_file} row 7), {HOTPOTQA} ({hotpotqa_file} row 1)"
        in failures[3]["detail"]
    )
    assert "skipped 4 rows: 1 prompt not in dataset, 1 ground truth differs" in result.stdout


def test_a_row_that_does_not_join_stops_the_run(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, hotpotqa_file = bad_run(tmp_path, chatml)
    result = run_cli_here(
        "score", dump, "-o", tmp_path / "out.jsonl", "--dataset", nq_file, "--dataset",
        hotpotqa_file,
    )  # fmt: skip
    assert result.returncode == 1
    message = one_line_error(result)
    assert message.startswith(f"{dump}: line 2: prompt (column 'input') matches no prompt")
    assert not (tmp_path / "out.jsonl").exists()


def test_dataset_and_data_source_are_a_usage_error(tmp_path: Path, chatml: Any) -> None:
    dump, nq_file, _, _ = mixed_run(tmp_path, chatml)
    for option in ("--data-source", "--data-source-column"):
        result = run_cli_here(
            "score", dump, "-o", tmp_path / "o.jsonl", "--dataset", nq_file, option, "x"
        )
        assert result.returncode == 2
        assert "give --dataset or --data-source/--data-source-column, not both" in one_line_error(
            result
        )


def test_datasets_over_the_caps_or_without_columns_are_refused(tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "0.jsonl", [])
    rows = pa.table({"x": pa.array(np.zeros(datasets.MAX_DATASET_ROWS + 1, dtype=np.int8))})
    pq.write_table(rows, tmp_path / "many.parquet")
    with (tmp_path / "big.parquet").open("wb") as sparse:
        sparse.truncate(datasets.MAX_DATASET_BYTES + 1)
    pq.write_table(pa.table({"data_source": ["nq"]}), tmp_path / "no_prompt.parquet")
    write_jsonl(tmp_path / "bad.jsonl", [{"data_source": "nq", "prompt": "a string"}])
    cap = datasets.MAX_DATASET_ROWS
    expected = {
        "many.parquet": f"{cap + 1:,} rows; the datasets hold over {cap:,} rows, the cap",
        "big.parquet": f"2,147,483,649 bytes, over the {datasets.MAX_DATASET_BYTES:,}-byte cap",
        "no_prompt.parquet": "no 'prompt' column (verl's datasets have data_source, prompt, "
        "reward_model); columns: data_source",
        "bad.jsonl": "line 1: prompt must be a list of chat messages, got str",
        "absent.parquet": "cannot read: No such file or directory",
        "0.jsonl.txt": "not a verl dataset (.jsonl, .jsonl.gz, .parquet)",
    }
    for name, reason in expected.items():
        result = run_cli_here(
            "score", dump, "-o", tmp_path / "o.jsonl", "--dataset", tmp_path / name
        )
        assert result.returncode == 2, result.stderr
        assert one_line_error(result) == f"--dataset {tmp_path / name}: {reason}"


# ------------------------------------------------------------------------- the join rule


def _index(tmp_path: Path, rows: list[dict[str, Any]]) -> datasets.PromptIndex:
    return datasets.load([write_jsonl(tmp_path / "d.jsonl", rows)])


def _row(source: str, content: str, golds: list[str] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"data_source": source, "prompt": [{"role": "user", "content": content}]}
    if golds is not None:
        row["reward_model"] = {"ground_truth": {"target": golds}}
    return row


def test_the_join_ignores_whitespace_and_a_trimming_template(tmp_path: Path) -> None:
    llama = _tokenizer(LLAMA3, ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"])
    index = _index(tmp_path, [_row("a", "  Who  wrote\nHamlet?\n"), _row("b", "Who wrote Emma?")])
    messages = [{"role": "user", "content": "Who wrote\n\nHamlet?  "}]
    text = decoded_prompt(llama, messages)
    assert text.startswith("user\n\nWho wrote") and text.endswith("assistant\n\n")
    assert index.data_source({"input": text}, None) == "a"


def test_the_longest_prompt_ending_near_the_end_wins(tmp_path: Path) -> None:
    index = _index(
        tmp_path,
        [_row("short", "Question: who?"), _row("long", "Context: x. Question: who?", ["y"])],
    )
    gold = {"target": ["y"]}
    assert index.data_source({"input": "Context: x. Question: who? assistant"}, gold) == "long"
    assert index.data_source({"input": "Question: who?"}, None) == "short"
    near = "Question: who?" + "x" * datasets.SUFFIX_CHARS
    assert index.data_source({"input": near}, None) == "short"
    far = near + "x"
    failure = index.data_source({"input": far}, None)
    assert isinstance(failure, tuple) and failure[0] == "prompt not in dataset"
    # The ground truth of the matched row is checked, in any key order and list form.
    assert index.data_source({"input": "Context: x. Question: who?"}, {"target": ("y",)}) == "long"
    mismatch = index.data_source({"input": "Context: x. Question: who?"}, {"target": ["z"]})
    assert isinstance(mismatch, tuple) and mismatch[0] == "ground truth differs from dataset"


def test_resume_keeps_outputs_only_for_the_same_datasets(tmp_path: Path, chatml: Any) -> None:
    rows = sample_rows(NQ)
    run = tmp_path / "rollouts"
    run.mkdir()
    write_dump(run / "1.jsonl", [dump_entry(chatml, row, 1) for row in rows[:15]])
    write_dump(run / "2.jsonl", [dump_entry(chatml, row, 2) for row in rows[15:]])
    dataset = write_dataset(tmp_path / "nq.parquet", rows)
    command = ("score", run, "-o", tmp_path / "out", "--dataset", dataset, "--resume")
    assert run_cli_here(*command).returncode == 0
    again = run_cli_here(*command)
    assert again.stdout.startswith("resumed: all 2 outputs of ")
    write_dataset(dataset, [{**row, "data_source": HOTPOTQA} for row in rows])  # relabelled
    changed = run_cli_here(*command, "--summary-json", tmp_path / "s.json")
    assert changed.returncode == 0, changed.stderr
    summary = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert summary["resumed_files"] == [] and list(summary["sources"]) == [HOTPOTQA]
