#!/usr/bin/env python3
"""Switchyard command line: the parser (`build_parser`), the table of commands (`COMMANDS`; each a `cmd_NAME(args)`
in package/commands/ that calls one library function and prints) and the mapping of errors to exit codes.

Every error ends in a one-line `error: …` on stderr and a non-zero exit, never a traceback: our own errors
(errors.py) exit with their class's code; anything unexpected exits 1 and its traceback goes to the error log
(`$SWITCHYARD_CACHE_DIR/errors.log`, default ~/.cache/switchyard; SWITCHYARD_DEBUG=1 raises it instead). A closed
pipe (`switchyard list --json | head`) ends the command quietly, as Unix tools do.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path

from switchyard.commands import chat, config, documents, evaluate, query, serve
from switchyard.commands.common import Terminated
from switchyard.errors import EXIT_FAIL, SwitchyardError, first_line, program

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a Unix tool killed by a closed pipe reports
INDEX_DIR_HELP = "index location (LanceDB URI); overrides store.uri"
EVERY_CONFIG_HELP = "override a value in every config (repeatable)"
HISTORY_HELP = (
    "a conversation's earlier turns: a JSON list of {role, content} messages (user/assistant), or one a line; "
    "- reads standard input"
)
UPLOAD_DIR = ".switchyard/uploads"  # uploads, and the key file of an index on object storage


def _set_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def _index_dir_option(p: argparse.ArgumentParser, help: str = INDEX_DIR_HELP) -> None:
    p.add_argument("--index-dir", metavar="DIR", help=help)


def _upload_dir_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--upload-dir", default=UPLOAD_DIR, metavar="DIR", help=help)


def _state_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state",
        metavar="URL",
        help="postgresql://... shared by several servers: keys, per-key limits, the audit log, upload jobs, paused "
        "runs and conversations (default: $SWITCHYARD_STATE_URL, else files beside the index for one server)",
    )


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", metavar="FILE", help="pipeline YAML (defaults < FILE < --set)")
    _set_option(p, "override one config value, e.g. --set retrieve.fusion.method=rrf (repeatable)")
    _index_dir_option(p)
    p.add_argument("--collection", metavar="NAME", help="collection (table) to use; overrides store.collection")
    return p


def _served(config_help: str) -> argparse.ArgumentParser:
    """The options of the long-running servers (serve, mcp): several pipelines over one index."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--config", dest="configs", action="append", metavar="FILE", help=config_help)
    _set_option(p, EVERY_CONFIG_HELP)
    _index_dir_option(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog=program(), description="Switchyard: retrieval-augmented QA over your documents"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", parents=[common], help="add or update documents (files or folders)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--acl",
        metavar="LABELS",
        help="access labels of the documents, e.g. hr,finance: only keys with "
        "one of these groups read them (a corpus record's own `acl` wins)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="read, chunk and embed on the Ray cluster at ADDRESS (`auto`: the "
        "one running here); needs the ray extra (docs/ray.md)",
    )

    p = sub.add_parser("ask", parents=[common], help="answer a question over the indexed documents")
    p.add_argument("question")
    p.add_argument("--where", metavar="FILTER", help='restrict retrieval, e.g. "source~handbook"')
    p.add_argument(
        "--json", action="store_true", help="print one JSON object (answer, citations, trace, usage, config)"
    )
    p.add_argument("--trace", action="store_true", help="show every node's input/output summary and timing")
    p.add_argument("--history", metavar="FILE", help=HISTORY_HELP)

    p = sub.add_parser("chat", parents=[common], help="a conversation: follow-up questions answered with their history")
    p.add_argument("--thread", metavar="ID", help="keep the turns in thread ID on disk, beside the index (resume it)")
    p.add_argument("--where", metavar="FILTER", help='restrict retrieval, e.g. "source~handbook"')
    p.add_argument("--plain", action="store_true", help="one question a line in, one answer a line out (no prompts)")
    p.add_argument("--json", action="store_true", help="one JSON object a line per answer (as `ask --json`)")

    p = sub.add_parser("trace", help="replay a saved run (`ask --json` output) step by step")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--delay", type=float, default=0.0, help="seconds to pause between steps")

    p = sub.add_parser("graph", parents=[common], help="draw the compiled pipeline graph (offline)")
    p.add_argument("--format", choices=["mermaid", "ascii", "png", "svg"], default="mermaid")
    p.add_argument("--out", metavar="FILE", help="write to FILE (required for png)")

    p = sub.add_parser("search", parents=[common], help="ranked passages for a query")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=None, help="passages to show (default: rerank.top_k)")
    p.add_argument("--where", metavar="FILTER", help='metadata filter, e.g. "source~manual and page=2"')
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--history", metavar="FILE", help=HISTORY_HELP)

    p = sub.add_parser("list", parents=[common], help="indexed documents")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("delete", parents=[common], help="remove documents by id or by source path")
    p.add_argument("targets", nargs="+", metavar="DOC_ID|PATH")

    p = sub.add_parser(
        "eval-retrieval",
        parents=[common],
        help="nDCG/recall/MRR on BEIR folders (several: one table and the macro average)",
    )
    p.add_argument("datasets", nargs="+", metavar="DIR")
    p.add_argument(
        "--fusion",
        dest="fusions",
        action="append",
        default=[],
        metavar="NAME=KEY=VALUE",
        help="also score a fusion variant NAME with retrieve.fusion.KEY=VALUE over the same lists, e.g. "
        "--fusion z=normalization=zscore (repeat a NAME to set several keys)",
    )
    p.add_argument("--split", default="test", help="qrels split to score (default: test)")
    p.add_argument("--limit", type=int, help="only the first N queries (sorted by id)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", metavar="FILE", help="also write the JSON result (with the resolved config) here")

    p = sub.add_parser(
        "fit-adapter", parents=[common], help="fit a query adapter for dense search on a BEIR folder's labelled queries"
    )
    p.add_argument("dataset", metavar="DIR")
    p.add_argument("--out", required=True, metavar="FILE.npz", help="where to write the adapter")
    p.add_argument("--split", default="train", help="qrels split to learn from (default: train)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--negatives", type=int, default=30, help="hard negative chunks per query (default: 30)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("eval", help="compare pipeline configs on a QA dataset (accuracy, grounding, cost)")
    p.add_argument("dataset", metavar="DATASET", help="PhantomWiki folder, HotpotQA JSON/JSONL, or plain JSONL")
    p.add_argument("--configs", nargs="+", required=True, metavar="YAML", help="pipeline configs to compare")
    p.add_argument("--runs", type=int, default=1, help="runs per config and question (mean ± SD)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--out", default="eval-out", metavar="DIR", help="report folder (resumes if it has results)")
    p.add_argument("--corpus", metavar="PATH", help="documents to index, for a plain JSONL dataset")
    _index_dir_option(p, "where eval collections live (default: DIR/index)")
    _set_option(p, EVERY_CONFIG_HELP)
    p.add_argument(
        "--judge",
        metavar="YAML",
        help="also judge faithfulness with the LLM of this config's llm: "
        "section (off by default; e.g. configs/fixed-openai.yaml)",
    )
    p.add_argument(
        "--metrics",
        nargs="+",
        default=[],
        metavar="NAME",
        help="also score the research's metrics: similarity (answer vs gold embedding cosine, no LLM), "
        "answer_relevance and context_relevance (RAGAS-style, need --judge); docs/evaluation.md",
    )
    p.add_argument(
        "--baseline",
        metavar="NAME",
        help="config the others are paired against (default: fixed, if compared, else the first)",
    )
    p.add_argument("--retry-errors", action="store_true", help="ask again the questions that failed last time")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="questions in flight at once through one process (default 1; e.g. 8 against a model server)",
    )
    p.add_argument(
        "--plot-metric",
        choices=["f1", "contains", "exact_match"],
        default="f1",
        help="accuracy metric of the plots (default: f1)",
    )
    p.add_argument(
        "--llm-cache",
        metavar="DIR",
        help="record every LLM request and reply in DIR; requests "
        "recorded before are answered from it (sets llm.cache_dir)",
    )
    p.add_argument(
        "--vector-cache",
        metavar="DIR",
        help="record every embedding vector computed in DIR; texts "
        "recorded before are answered from it (sets embedding.vector_cache)",
    )
    p.add_argument(
        "--replay",
        action="store_true",
        help="answer every LLM request from --llm-cache DIR, with no "
        "model, and every embedding from --vector-cache DIR; what was never recorded is an error",
    )
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="resume into --out even though its manifest differs "
        "(code, models, prompts, configs, collections...); the differences are recorded",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="ask the questions on the Ray cluster at ADDRESS (`auto`: the "
        "one running here), ray.actors actors; needs the ray extra",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--unreviewed",
        action="store_true",
        help="a generated set (`eval generate`): also score the items not reviewed (rejected ones never)",
    )

    p = sub.add_parser(
        "eval-generate",
        parents=[common],
        help="generate a question set from documents (also `eval generate`); docs/evaluation.md",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (none: the collection's chunks)")
    p.add_argument("--out", required=True, metavar="DIR", help="the set's folder (resumes if it has tries)")
    p.add_argument("--size", type=int, default=50, help="items to keep (default 50)")
    p.add_argument("--max-tries", type=int, default=0, metavar="N", help="tries at most (default: 3 x --size)")
    p.add_argument("--seed", type=int, default=0, help="the passage sample's seed (default 0)")
    p.add_argument("--two-hop", type=float, default=0.0, metavar="SHARE", help="share of two-hop tries (default 0)")
    p.add_argument("--min-chars", type=int, default=200, metavar="N", help="shorter passages are left out")
    p.add_argument(
        "--answers", choices=["model", "passage"], default="model", help="who picks the answer: the model (default), "
        "or the passage first (a date, number, name or what follows 'is' in a seeded sentence; for a weak model)",
    )  # fmt: skip
    p.add_argument(
        "--max-copy", type=float, default=0.5, metavar="SHARE", help="reject a question more of whose word "
        "trigrams occur in its passage (default 0.5)",
    )  # fmt: skip
    p.add_argument(
        "--max-similar", type=float, default=0.92, metavar="COS", help="reject a question this close (embedding "
        "cosine) to a kept one (default 0.92)",
    )  # fmt: skip
    p.add_argument("--llm-cache", metavar="DIR", help="record the LLM replies in DIR, answer from it (llm.cache_dir)")
    p.add_argument("--replay", action="store_true", help="answer only from --llm-cache DIR, with no model")
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser("eval-review", help="accept, edit or reject a generated set's items (also `eval review`)")
    p.add_argument("set", metavar="SET", help="the folder of `eval generate`")

    p = sub.add_parser(
        "serve",
        parents=[
            _served(
                "pipeline to serve, by file or shipped name (repeatable; default: "
                "fixed); requests pick one by its file stem"
            )
        ],
        help="run the HTTP service (API, streaming, OpenAI-compatible endpoint, web page)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--max-in-flight",
        type=int,
        default=4,
        metavar="N",
        help="runs at once; beyond it requests get 429 with Retry-After (default 4)",
    )
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-request run timeout (default 120)")
    p.add_argument("--max-question-chars", type=int, default=2000, metavar="N")
    p.add_argument("--max-upload-files", type=int, default=20, metavar="N")
    p.add_argument("--max-upload-mb", type=float, default=20.0, metavar="MB", help="per uploaded file (default 20)")
    _upload_dir_option(p, f"where uploaded files are kept (default {UPLOAD_DIR})")
    p.add_argument("--no-warm-up", action="store_true", help="load models on the first request, not at start")
    p.add_argument(
        "--audit-log",
        metavar="FILE",
        help="append one JSON line per request here (key name, route, collection, status, ms; never the key)",
    )
    p.add_argument("--audit-questions", action="store_true", help="put the question in the audit lines too")
    p.add_argument(
        "--allow-token-with-keys",
        action="store_true",
        help="accept SWITCHYARD_API_TOKEN (it opens everything) even while API keys exist; refused by default",
    )
    _state_option(p)
    p.add_argument(
        "--job-lease",
        type=float,
        default=30.0,
        metavar="S",
        help="with --state: seconds a server's claim on an upload job lasts unless renewed; another server takes "
        "over a job whose claim lapsed (default 30)",
    )

    p = sub.add_parser("keys", help="API keys of the index: create (printed once), list, revoke")
    keys = p.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    key_common = argparse.ArgumentParser(add_help=False, parents=[common])
    _upload_dir_option(key_common, "where the key file lives when the index is on object storage")
    _state_option(key_common)
    k = keys.add_parser("create", parents=[key_common], help="create a key and print it (once)")
    k.add_argument("name")
    k.add_argument("--collections", metavar="C1,C2", help="the collections it may read (required unless --admin)")
    k.add_argument("--write", action="store_true", help="may also upload to and delete from them")
    k.add_argument("--admin", action="store_true", help="every collection and document; may create collections")
    k.add_argument(
        "--groups",
        metavar="G1,G2",
        help="access groups: documents labelled (ingest --acl) with one of "
        "them are readable; unlabelled ones always are",
    )
    k.add_argument("--rpm", type=int, default=0, metavar="N", help="requests per minute (default 0: no limit)")
    k.add_argument("--max-in-flight", type=int, default=0, metavar="N", help="runs at once (default 0: no limit)")
    k = keys.add_parser("list", parents=[key_common], help="the keys (names and rights; never the keys)")
    k.add_argument("--json", action="store_true")
    k = keys.add_parser("revoke", parents=[key_common], help="delete a key: it stops working at once")
    k.add_argument("name")

    sub.add_parser(
        "mcp",
        parents=[
            _served(
                "pipeline the `ask` tool can use, by file or shipped name (repeatable; "
                "default: fixed); the first is the default and the one `search` uses"
            )
        ],
        help="serve the MCP server over stdio (tools search, ask, list_collections; documents as "
        "resources), for MCP hosts such as Claude Desktop",
    )

    p = sub.add_parser("state", help="the state servers share in PostgreSQL (serve --state)")
    state = p.add_subparsers(dest="state_action", required=True, metavar="ACTION")
    m = state.add_parser(
        "migrate",
        help="copy a single-machine deployment's keys, upload jobs, paused runs and conversations into PostgreSQL "
        "(idempotent)",
    )
    m.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="DIR",
        help="where the server kept them: the index folder (the upload folder for an index on object storage)",
    )
    m.add_argument("--to", dest="url", metavar="URL", help="postgresql://... (default: $SWITCHYARD_STATE_URL)")

    p = sub.add_parser("config", parents=[common], help="show the resolved config")
    p.add_argument("action", choices=["show"])
    p.add_argument("--json", action="store_true")
    return parser


COMMANDS = {
    "ingest": documents.cmd_ingest,
    "ask": query.cmd_ask,
    "chat": chat.cmd_chat,
    "trace": query.cmd_trace,
    "graph": query.cmd_graph,
    "search": query.cmd_search,
    "list": documents.cmd_list,
    "delete": documents.cmd_delete,
    "eval-retrieval": evaluate.cmd_eval_retrieval,
    "fit-adapter": evaluate.cmd_fit_adapter,
    "eval": evaluate.cmd_eval,
    "eval-generate": evaluate.cmd_eval_generate,
    "eval-review": evaluate.cmd_eval_review,
    "serve": serve.cmd_serve,
    "mcp": serve.cmd_mcp,
    "keys": serve.cmd_keys,
    "state": serve.cmd_state,
    "config": config.cmd_config,
}


def _log_unexpected(exc: BaseException) -> Path | None:
    """Append the traceback of an unexpected error to the error log; its path (None if it cannot be written)."""
    cache = Path(os.environ.get("SWITCHYARD_CACHE_DIR") or Path.home() / ".cache" / "switchyard")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path = cache / "errors.log"
        with path.open("a", encoding="utf-8") as log:
            log.write(f"$ {' '.join(sys.argv)}\n{''.join(traceback.format_exception(exc))}\n")
        return path
    except OSError:
        return None


def set_process_defaults() -> None:
    """What the command line (and the server it starts) sets for its own process, and the library never does:
    offline, quiet model loading (configs/runtime_env.py; values the user set win), quiet third-party loggers, and
    OpenTelemetry's SDK from the OTEL_* variables (switchyard.otel_sdk)."""
    import logging

    from switchyard import otel_sdk
    from switchyard.configs import runtime_env

    runtime_env.apply()
    # a task that failed after an evaluation stopped on another's error (say, the same missing reply): the error
    # already reported is enough; Ray would print each such one's traceback
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a malformed PDF is reported per file, once
    otel_sdk.install()


EVAL_SUBCOMMANDS = ("generate", "review")


def _spelled_out(argv: list[str]) -> list[str]:
    """`eval generate ...` and `eval review ...` are `eval-generate ...` and `eval-review ...` (a dataset folder
    named like one is given as ./generate)."""
    if len(argv) >= 2 and argv[0] == "eval" and argv[1] in EVAL_SUBCOMMANDS:
        return [f"eval-{argv[1]}", *argv[2:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_spelled_out(list(sys.argv[1:] if argv is None else argv)))
    try:
        set_process_defaults()
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly; point stdout at /dev/null so the interpreter's final flush
        # does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SwitchyardError as exc:
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        if os.environ.get("SWITCHYARD_DEBUG"):
            raise
        log = _log_unexpected(exc)
        where = f"traceback in {log}" if log else "set SWITCHYARD_DEBUG=1 for details"
        print(f"error: unexpected {type(exc).__name__}: {first_line(exc)} ({where})", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
