"""``reward-plugins retriever``: build an on-disk BM25 index of a corpus (``index``), and answer
Search-R1's ``POST /retrieve`` from it until interrupted (``serve``)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from reward_plugins.cli.common import (
    OneLineParser,
    Terminated,
    check_port,
    error,
    log_server_to_stderr,
)
from reward_plugins.search.index import DEFAULT_HEAP_MB
from reward_plugins.search.server import Limits

HELP = "a BM25 retriever in Search-R1's protocol: index, serve (needs [search])"
DESCRIPTION = None


def add_arguments(command: OneLineParser) -> None:
    """The actions ``index`` and ``serve``."""
    actions = command.add_subparsers(dest="retriever_command", required=True, metavar="ACTION")
    index = actions.add_parser(
        "index",
        help="build an on-disk BM25 index of a JSON Lines corpus (once)",
        description="Stream CORPUS (Search-R1's format, plain or .gz) into a BM25 index in "
        "INDEX_DIR, for `retriever serve --index INDEX_DIR`.",
    )
    _add_index_arguments(index)
    index.set_defaults(command_parser=index)
    serve = actions.add_parser(
        "serve",
        help="answer POST /retrieve from an index (or a small corpus) until interrupted",
        description="Answer Search-R1's POST /retrieve requests from a BM25 index.",
    )
    _add_serve_arguments(serve)
    serve.set_defaults(command_parser=serve)


def _add_index_arguments(index: argparse.ArgumentParser) -> None:
    """The options of ``retriever index``: the corpus, the index, the indexing's resources."""
    index.add_argument("corpus", type=Path, metavar="CORPUS.jsonl[.gz]")
    index.add_argument(
        "-o", "--output", type=Path, required=True, metavar="INDEX_DIR", help="must not exist"
    )
    _add_bad_lines_argument(index)
    index.add_argument(
        "--heap-mb",
        type=int,
        default=DEFAULT_HEAP_MB,
        metavar="MB",
        help=f"the indexing memory budget, shared by the threads ({DEFAULT_HEAP_MB})",
    )
    index.add_argument(
        "--threads", type=int, metavar="N", help="indexing threads (the usable CPUs, at most 8)"
    )
    index.add_argument("--force", action="store_true", help="replace an existing INDEX_DIR")
    index.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar (shown on a terminal)"
    )


def _add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """The options of ``retriever serve``: the index or corpus, the address, the search, the
    limits (one per :class:`~reward_plugins.search.server.Limits` field)."""
    source = serve.add_mutually_exclusive_group()
    source.add_argument(
        "--index", type=Path, metavar="INDEX_DIR", help="an index of `retriever index`"
    )
    source.add_argument(
        "--corpus",
        type=Path,
        metavar="CORPUS.jsonl",
        help='{"id": str, "contents": "Title\\ntext"} per line, indexed into the cache '
        "once (default: the shipped sample)",
    )
    _add_bad_lines_argument(serve)
    serve.add_argument("--host", default="127.0.0.1", help="(127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="(8000; 0: a free port)")
    serve.add_argument(
        "--topk", type=int, default=3, metavar="K", help="documents when a request says none (3)"
    )
    serve.add_argument(
        "--common-df",
        type=float,
        metavar="SHARE",
        help="terms found in more than this share of the passages only re-score the best "
        "passages of the other terms (faster on large corpora; off: exact BM25)",
    )
    for limit in dataclasses.fields(Limits):
        default = "the usable CPUs" if limit.name == "search_threads" else limit.default
        serve.add_argument(
            "--" + limit.name.replace("_", "-"),
            type=float if limit.type == "float" else int,
            default=None if limit.name == "search_threads" else limit.default,
            metavar="N",
            help=f"{limit.metadata['help']} ({default})",
        )


def _add_bad_lines_argument(command: argparse.ArgumentParser) -> None:
    """``--bad-lines refuse|skip``: what a corpus line that is not a document does."""
    command.add_argument(
        "--bad-lines",
        choices=("refuse", "skip"),
        default="refuse",
        help="a corpus line that is not a document: stop with its line number, or skip and "
        "count it (refuse)",
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Run the chosen action."""
    return _ACTIONS[args.retriever_command](args, parser)


def _index(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Build the index; print how many documents it holds and how long it took."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.search.index import build_index

    began = time.perf_counter()
    try:
        manifest = build_index(
            args.corpus,
            args.output,
            bad_lines=args.bad_lines,
            heap_mb=args.heap_mb,
            threads=args.threads,
            progress=not args.quiet and sys.stderr.isatty(),
            replace=args.force,
        )
    except (ImportError, RewardPluginsError) as failure:
        return error(f"retriever index: {failure}", 2)
    except OSError as failure:
        return error(f"retriever index: {args.corpus}: {failure.strerror or failure}", 2)
    skipped = f", skipped {manifest['skipped']} bad line(s)" if manifest["skipped"] else ""
    print(
        f"indexed {manifest['documents']} documents of {args.corpus} into {args.output} in "
        f"{time.perf_counter() - began:.1f} s{skipped}"
    )
    return 0


def _serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Open the index (or index the corpus), then serve it until interrupted or terminated."""
    from reward_plugins.errors import RewardPluginsError
    from reward_plugins.search.corpus import sample_corpus_path
    from reward_plugins.search.index import SearchIndex, check_common_df
    from reward_plugins.search.server import serve

    limits = _serve_limits(args, parser)
    try:
        common_df = check_common_df(args.common_df)
    except RewardPluginsError as failure:
        parser.error(f"--common-df: {str(failure).partition(': ')[2]}")
    source = args.index or args.corpus or sample_corpus_path()
    try:
        if args.index is not None:
            index = SearchIndex(args.index, common_df=common_df)
        else:
            progress = sys.stderr.isatty()
            index = SearchIndex.for_corpus(
                source, bad_lines=args.bad_lines, progress=progress, common_df=common_df
            )
    except (ImportError, RewardPluginsError) as failure:
        return error(f"retriever serve: {failure}", 2)
    except OSError as failure:
        return error(f"retriever serve: {source}: {failure.strerror or failure}", 2)
    log_server_to_stderr()

    def ready(server: Any) -> None:
        print(f"serving {len(index)} documents of {source} at {server.url}", flush=True)

    try:
        with suppress(KeyboardInterrupt, Terminated):  # how a server stops: no error
            serve(index, args.host, args.port, args.topk, limits, ready)
    except OSError as failure:
        return error(f"retriever serve: {args.host}:{args.port}: {failure.strerror or failure}", 2)
    return 0


def _serve_limits(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Limits:
    """The server's limits from their options; ``--topk`` and ``--port`` checked (a usage
    error, naming the option, for a wrong value)."""
    from reward_plugins.errors import RewardPluginsError

    if args.topk < 1:
        parser.error(f"--topk must be at least 1, got {args.topk}")
    check_port(args.port, parser)
    given = {spec.name: getattr(args, spec.name) for spec in dataclasses.fields(Limits)}
    try:
        limits = Limits(**{name: value for name, value in given.items() if value is not None})
    except RewardPluginsError as failure:
        name, _, reason = str(failure).partition(": ")
        parser.error(f"--{name.replace('_', '-')}: {reason}")
    if args.topk > limits.max_topk:
        parser.error(f"--topk {args.topk} is above --max-topk {limits.max_topk}")
    return limits


_ACTIONS: dict[str, Callable[[argparse.Namespace, argparse.ArgumentParser], int]] = {
    "index": _index,
    "serve": _serve,
}
"""Each action of ``retriever`` by its name."""
