"""The command line as a user runs it: real processes, real index on disk, clear errors and exit codes."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES

BEIR_A, BEIR_B = ROOT / "tests" / "fixtures" / "beir_rail", ROOT / "tests" / "fixtures" / "beir_signals"


def cli(*args, cwd=None, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        input=stdin,
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    index = tmp_path_factory.mktemp("cli") / "index"
    done = cli("ingest", SAMPLES, "--index-dir", index, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "5 added" in done.stdout
    return index


@pytest.mark.slow
class TestCli:
    def test_search_json_has_sources_pages_and_scores(self, index):
        out = cli("search", "What protects workers on a track?", "--index-dir", index, "--json", "--k", "3")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        top = data["results"][0]
        assert top["source"].endswith("yard-safety-handbook.pdf") and top["page"] == 1
        assert {"bm25", "dense", "fused"} <= set(top["scores"])
        assert data["config"]["retrieve"]["mode"] == "hybrid" and len(data["results"]) <= 3

    def test_search_text_output_and_filter(self, index):
        out = cli("search", "gauge", "--index-dir", index, "--where", "source~.txt")
        assert out.returncode == 0, out.stderr
        assert "track-gauge" in out.stdout and "bm25" in out.stdout and ".md" not in out.stdout

    def test_list_and_delete_by_path(self, index, tmp_path):
        listed = json.loads(cli("list", "--index-dir", index, "--json").stdout)
        assert len(listed) == 5
        copy = tmp_path / "index"
        subprocess.run(["cp", "-r", str(index), str(copy)], check=True)
        out = cli("delete", SAMPLES / "track-gauge.txt", "--index-dir", copy)
        assert out.returncode == 0 and "deleted 1 document" in out.stdout
        left = json.loads(cli("list", "--index-dir", copy, "--json").stdout)
        assert len(left) == 4 and not any("track-gauge" in d["source"] for d in left)
        out = cli("delete", "no-such-doc", "--index-dir", copy)
        assert out.returncode != 0 and "nothing deleted" in out.stderr

    def test_config_show_resolves_layers(self, tmp_path):
        f = tmp_path / "c.yaml"
        f.write_text("retrieve: {fusion: {method: rrf}}\n")
        out = cli("config", "show", "--config", f, "--set", "retrieve.fusion.rrf_k=7", "--json")
        data = json.loads(out.stdout)
        assert data["retrieve"]["fusion"]["method"] == "rrf" and data["retrieve"]["fusion"]["rrf_k"] == 7.0

    @pytest.mark.parametrize(
        "args, message",
        [
            (["search", "  "], "query is empty"),
            (["search", "x", "--collection", "nope"], "does not exist"),
            (["search", "x", "--where", "color=red"], "unknown filter field"),
            (["search", "x", "--set", "retrieve.fusion.method=max"], "retrieve.fusion.method"),
            (["ingest", "/no/such/path"], "no such file"),
            (["list", "--collection", "nope"], "does not exist"),
            (["eval-retrieval", "/no/such/dir"], "not a BEIR folder"),
            (["eval-retrieval", BEIR_A, "/no/such/dir"], "not a BEIR folder"),
            (["eval-retrieval", BEIR_A, BEIR_A], "same name"),
            (["eval-retrieval", BEIR_A, "--fusion", "hybrid=method=rrf"], "built-in configuration"),
            (["eval-retrieval", BEIR_A, "--fusion", "z=normalization=bogus"], "retrieve.fusion.normalization"),
            (["eval-retrieval", BEIR_A, "--fusion", "z"], "expected NAME=KEY=VALUE"),
            (
                ["eval-retrieval", BEIR_A, "--set", "retrieve.retrievers.dense.query_adapter=/no/such.npz"],
                "no such query adapter file",
            ),
            (["fit-adapter", "/no/such/dir", "--out", "a.npz"], "not a BEIR folder"),
            (["fit-adapter", BEIR_A, "--out", "a.bin", "--split", "test"], "ends in .npz"),
            (["fit-adapter", BEIR_A, "--out", "a.npz", "--split", "train"], "missing qrels/train.tsv"),
            (["fit-adapter", BEIR_A, "--out", "a.npz", "--split", "test", "--epochs", "0"], "need epochs >= 1"),
        ],
    )
    def test_bad_input_is_one_clear_line(self, index, args, message):
        out = cli(*args, "--index-dir", index)
        assert out.returncode != 0
        assert message in out.stderr
        assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0

    def test_a_closed_pipe_ends_the_command_quietly(self, index):
        done = subprocess.run(
            f"'{sys.executable}' '{ROOT / 'cli.py'}' list --json --index-dir '{index}' | head -c 1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "SWITCHYARD_CACHE_DIR": str(index.parent / "cache")},
        )
        assert done.stdout == "[" and done.stderr == ""

    def test_an_unexpected_error_is_one_line_and_its_traceback_goes_to_the_log(self, index, tmp_path):
        cache = tmp_path / "cache"
        code = (
            "import sys\nfrom switchyard import cli\n"
            "def boom(args):\n    raise KeyError('deep inside')\n"
            "cli.COMMANDS['list'] = boom\nsys.exit(cli.main(['list']))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env={**os.environ, "SWITCHYARD_CACHE_DIR": str(cache)},
        )
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "unexpected KeyError: 'deep inside'" in done.stderr and str(cache / "errors.log") in done.stderr
        log = (cache / "errors.log").read_text()
        assert "Traceback (most recent call last)" in log and "in boom" in log and "KeyError: 'deep inside'" in log

    def test_bad_config_file_names_file_and_key(self, index, tmp_path):
        f = tmp_path / "bad.yaml"
        f.write_text("rerank: {metod: none}\n")
        out = cli("search", "x", "--config", f, "--index-dir", index)
        assert out.returncode == 2 and "bad.yaml: rerank.metod: unknown key" in out.stderr

    def test_ingest_with_only_bad_files_fails_but_keeps_index(self, index, tmp_path):
        (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 junk")
        out = cli("ingest", tmp_path / "broken.pdf", "--index-dir", index, "--no-progress")
        assert out.returncode == 1 and "broken.pdf" in out.stderr and "not a readable PDF" in out.stderr
        assert len(json.loads(cli("list", "--index-dir", index, "--json").stdout)) == 5

    def test_ingest_mixed_good_and_bad_succeeds(self, tmp_path):
        (tmp_path / "ok.txt").write_text("Okay text.")
        (tmp_path / "bad.txt").write_bytes(b"\x00\x01\x02")
        out = cli("ingest", tmp_path, "--index-dir", tmp_path / "ix", "--no-progress")
        assert out.returncode == 0 and "1 added" in out.stdout and "binary file" in out.stderr


DOCS = [
    ("d1", "Hump yards", "Cars roll over the hump and retarders brake them."),
    ("d2", "Track gauge", "Standard gauge is 1,435 mm between the rails."),
    ("d3", "Couplers", "The Janney knuckle coupler couples automatically."),
    ("d4", "Signals", "Block signals keep trains apart on the same track."),
]


def write_beir(folder, docs, questions, split):
    """A BEIR folder: `docs` (id, title, text), `questions` (id, text, relevant doc id) labelled in qrels/`split`."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": i, "title": t, "text": x}) for i, t, x in docs))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": q, "text": t}) for q, t, _ in questions))
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, _, d in questions)
    )
    return folder


@pytest.mark.slow
def test_eval_retrieval_json_shape(tmp_path):
    beir = write_beir(
        tmp_path / "beir",
        DOCS[:3],
        [("q1", "what brakes cars on a hump", "d1"), ("q2", "distance between rails", "d2")],
        "test",
    )
    out = cli("eval-retrieval", beir, "--json", "--set", "rerank.method=dense_rescore")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["dataset"] == "beir" and data["index_s"] > 0
    assert set(data["results"]) == {"bm25", "dense", "e5", "hybrid", "hybrid+rerank"}  # e5: on by default
    for row in data["results"].values():
        assert set(row) == {
            "ndcg@10",
            "recall@1",
            "recall@5",
            "recall@10",
            "recall@100",
            "mrr@10",
            "query_ms_p50",
            "query_ms_p95",
        }
        assert row["recall@100"] == 1.0
    assert data["results"]["hybrid"]["ndcg@10"] == 1.0


@pytest.mark.slow
def test_fit_adapter_learns_the_labelled_documents_and_eval_retrieval_uses_it(tmp_path):
    # train questions whose labelled document is not the one their words point to: unadapted, dense ranks
    # the wrong one first; an adapter fitted on them must move each question to its labelled document
    beir = write_beir(
        tmp_path / "beir",
        DOCS,
        [
            ("q1", "how far apart are the rails", "d3"),
            ("q2", "what joins two cars together", "d4"),
            ("q3", "what keeps trains from colliding", "d1"),
            ("q4", "how are cars sorted in a yard", "d2"),
        ],
        "train",
    )
    index, adapter = tmp_path / "index", tmp_path / "adapter.npz"
    before = cli("eval-retrieval", beir, "--split", "train", "--index-dir", index, "--json")
    assert before.returncode == 0, before.stderr
    out = cli(
        "fit-adapter",
        beir,
        "--out",
        adapter,
        "--index-dir",
        index,
        "--epochs",
        "30",
        "--learning-rate",
        "0.01",
        "--negatives",
        "3",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    meta = json.loads(out.stdout)
    assert meta["queries"] == 4 and meta["skipped_queries"] == 0 and meta["split"] == "train"
    assert meta["config"]["embedding"]["model"] == meta["model"] and adapter.is_file()
    after = cli(
        "eval-retrieval",
        beir,
        "--split",
        "train",
        "--index-dir",
        index,
        "--json",
        "--set",
        f"retrieve.retrievers.dense.query_adapter={adapter}",
    )
    assert after.returncode == 0, after.stderr
    dense_before = json.loads(before.stdout)["results"]["dense"]
    dense_after = json.loads(after.stdout)["results"]["dense"]
    assert dense_before["recall@1"] <= 0.25 and dense_after["recall@1"] == 1.0
    assert json.loads(after.stdout)["config"]["retrieve"]["retrievers"]["dense"]["query_adapter"] == str(adapter)


@pytest.mark.slow
def test_eval_retrieval_on_several_folders_prints_one_table_and_the_macro_average(tmp_path):
    index = tmp_path / "index"
    args = ["--index-dir", index, "--fusion", "z=normalization=zscore", "--fusion", "z=weights={bm25: 0.5, dense: 0.5}"]
    out = cli("eval-retrieval", BEIR_A, BEIR_B, "--json", "--out", tmp_path / "suite.json", *args)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data == json.loads((tmp_path / "suite.json").read_text())
    assert data["split"] == "test" and [d["dataset"] for d in data["datasets"]] == ["beir_rail", "beir_signals"]
    assert [d["queries"] for d in data["datasets"]] == [3, 2]
    assert data["datasets"][0]["variants"]["z"]["normalization"] == "zscore"
    assert data["datasets"][0]["variants"]["z"]["weights"] == {"bm25": 0.5, "dense": 0.5}
    assert list(data["macro"]) == ["bm25", "dense", "e5", "hybrid", "z"]
    for name, row in data["macro"].items():
        for metric, value in row.items():
            per_dataset = [d["results"][name][metric] for d in data["datasets"]]
            assert value == pytest.approx(sum(per_dataset) / 2, abs=1e-4)
        assert row["recall@100"] == 1.0  # four documents per corpus: everything relevant is ranked
    # the collections are cached in --index-dir: the table run finds both unchanged
    table = cli("eval-retrieval", BEIR_A, BEIR_B, *args)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert "nDCG@10 / R@1 / R@10 / MRR@10" in lines[0]
    assert lines[1] == "| configuration | beir_rail (3 q) | beir_signals (2 q) | macro average |"
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[3:8]}
    assert list(rows) == ["bm25", "dense", "e5", "hybrid", "z"]
    hybrid_macro = data["macro"]["hybrid"]
    assert rows["hybrid"].endswith(
        f"| {hybrid_macro['ndcg@10']:.4f} / {hybrid_macro['recall@1']:.4f} / "
        f"{hybrid_macro['recall@10']:.4f} / {hybrid_macro['mrr@10']:.4f} |"
    )
    assert lines[8] == "the default against the best single retriever of each dataset (by nDCG@10):"
    for line, d in zip(lines[9:11], data["datasets"], strict=True):
        r = d["results"]
        single = max(data["singles"], key=lambda name: r[name]["ndcg@10"])  # the first of equals
        diff = r["hybrid"]["ndcg@10"] - r[single]["ndcg@10"]
        assert line.startswith(f"{d['dataset']}: hybrid vs best single {single}: nDCG@10 ")
        assert f"({diff:+.4f}), R@1 " in line
    assert data["singles"] == ["bm25", "dense", "e5"] and data["default"] == "hybrid"


@pytest.mark.slow
class TestCliAskAndGraph:
    def test_ask_json_schema_with_no_llm_config(self, index):
        out = cli(
            "ask",
            "Who patented the knuckle coupler?",
            "--json",
            "--config",
            ROOT / "configs" / "no-llm.yaml",
            "--index-dir",
            index,
        )
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert set(data) >= {"answer", "abstained", "citations", "trace", "usage", "config"}
        assert "Janney" in data["answer"] and not data["abstained"]
        assert data["citations"][0]["n"] == 1 and data["citations"][0]["source"].endswith("couplers.html")
        assert [e["node"] for e in data["trace"]] == ["rewrite", "retrieve", "rerank", "grade", "answer"]
        assert all("ms" in e for e in data["trace"]) and data["usage"]["llm_calls"] == 0
        assert data["config"]["resolved"]["answer"]["method"] == "extractive"

    def test_ask_text_with_trace(self, index):
        out = cli(
            "ask",
            "What is standard gauge?",
            "--trace",
            "--config",
            ROOT / "configs" / "no-llm.yaml",
            "--index-dir",
            index,
        )
        assert out.returncode == 0, out.stderr
        assert "Sources:" in out.stdout and "[1] Track gauge" in out.stdout
        assert "Trace:" in out.stdout and "grade" in out.stdout and "verdict:" in out.stdout

    @pytest.mark.parametrize(
        "args, message",
        [
            (["ask", " "], "question is empty"),
            (["ask", "x", "--collection", "nope"], "does not exist"),
            (["ask", "x", "--set", "llm.backend=claude"], "llm.backend"),
        ],
    )
    def test_ask_errors(self, index, args, message):
        out = cli(*args, "--index-dir", index)
        assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr

    def test_graph_formats(self, tmp_path):
        mermaid = cli("graph")
        assert mermaid.returncode == 0 and "grade -. &nbsp;retry&nbsp; .-> rewrite" in mermaid.stdout
        png = cli("graph", "--format", "png", "--out", tmp_path / "g.png")
        assert png.returncode == 0 and (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
        svg = cli("graph", "--config", ROOT / "configs" / "no-llm.yaml", "--format", "svg")
        assert svg.stdout.startswith("<svg")
        assert cli("graph", "--format", "png").returncode == 2


@pytest.fixture(scope="module")
def scripted_agent():
    """An OpenAI-compatible server replying as a whole zeroshot agent run (tests/nodes/scripted.py)."""
    from tests.nodes.scripted import zeroshot_agent
    from tests.scripted_openai_server import ScriptedOpenAIServer

    server = ScriptedOpenAIServer(zeroshot_agent)
    yield server
    server.close()


@pytest.mark.slow
class TestCliAskWithApproval:
    """`cli.py ask` with graph.router.approve asks on stderr/stdin before each action (here piped, not a tty)."""

    def ask(self, index, scripted_agent, stdin: str, *more: str):
        return cli(
            "ask",
            "Who patented the knuckle coupler?",
            "--config",
            "agent-approve",
            "--index-dir",
            index,
            "--set",
            "llm.backend=openai",
            "--set",
            f"llm.base_url={scripted_agent.url}",
            *more,
            stdin=stdin,
        )

    def test_approve_edit_and_reject_from_piped_input(self, index, scripted_agent):
        answers = [
            "e",
            '{"query": 3}',
            "e",
            '{"query": "Janney coupler patent"}',
            "maybe",
            "r",
            "rerank later",
            "a",
            "a",
            "a",
            "a",
            "a",
        ]
        out = self.ask(index, scripted_agent, "\n".join(answers) + "\n", "--json")
        assert out.returncode == 0, out.stderr
        assert "step 1: retrieve" in out.stderr and "[a]pprove / [e]dit arguments / [r]eject?" in out.stderr
        assert "the arguments of retrieve are strings; answer again" in out.stderr
        assert "answer a, e or r" in out.stderr
        steps = json.loads(out.stdout)["steps"]
        assert steps[0]["args"] == {"query": "Janney coupler patent"} and steps[0]["human"]["decision"] == "edit"
        assert steps[1]["action"] == "rerank" and steps[1]["human"] == {"decision": "reject", "reason": "rerank later"}
        assert all(s["human"]["decision"] == "approve" for s in steps[2:]) and steps[-1]["action"] == "answer"

    def test_end_of_input_is_a_clear_error(self, index, scripted_agent):
        out = self.ask(index, scripted_agent, "a\n")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert out.stderr.strip().endswith(
            "error: no answer on standard input (it ended): the paused run was left unanswered"
        )

    def test_an_answer_after_the_pause_expired_is_refused(self, index, scripted_agent):
        out = self.ask(index, scripted_agent, "a\n", "--set", "graph.router.approve_timeout_s=0.001")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert "expired" in out.stderr and "it cannot be resumed" in out.stderr

    def test_a_fixed_pipeline_with_approve_is_a_config_error(self, index):
        out = cli("ask", "x", "--index-dir", index, "--set", "graph.router.approve=true")
        assert out.returncode == 2 and "graph.router.approve pauses before each action" in out.stderr


def test_langgraph_json_points_at_a_loadable_graph():
    import importlib

    spec = json.loads((ROOT / "langgraph.json").read_text())["graphs"]["switchyard"]
    module_path, _, attr = spec.partition(":")
    module = importlib.import_module(module_path.removeprefix("./").removesuffix(".py").replace("/", "."))
    graph = getattr(module, attr)()
    assert set(graph.get_graph().nodes) >= {"rewrite", "retrieve", "rerank", "grade", "answer", "abstain"}


class TestCliTrace:
    def test_replays_steps_and_rejects_bad_files(self, tmp_path):
        run = {
            "question": "q?",
            "answer": "a [1].",
            "abstained": False,
            "steps": [
                {
                    "step": 1,
                    "thought": "look",
                    "action": "retrieve",
                    "args": {"query": "q"},
                    "guard": None,
                    "observation": "3 passages",
                    "router_ms": 5,
                    "llm_calls": 1,
                    "prompt_tokens": 9,
                    "completion_tokens": 2,
                    "action_ms": 20,
                    "plan": ["retrieve", "answer"],
                },
                {
                    "step": 2,
                    "thought": "enough",
                    "action": "grade",
                    "args": {},
                    "guard": None,
                    "agent": "search",
                    "message": "check them",
                    "thoughts": {"plan": "grade, answer", "criticism": "slow"},
                    "memory": ["Janney, 1873"],
                    "memory_summarised": True,
                    "observation": "verdict correct",
                },
                {
                    "step": 3,
                    "thought": "",
                    "action": "answer",
                    "args": {},
                    "guard": "budget",
                    "observation": "answered with 1 citation(s)",
                    "router_ms": 0,
                    "action_ms": 30,
                },
            ],
        }
        f = tmp_path / "run.json"
        f.write_text(json.dumps(run))
        out = cli("trace", f)
        assert out.returncode == 0
        assert 'step 1: retrieve({"query": "q"})' in out.stdout and "[guard: budget]" in out.stdout
        assert "thought: look" in out.stdout and "answer: a [1]." in out.stdout
        assert "hand-off: search <- check them" in out.stdout and "criticism: slow" in out.stdout
        assert "plan: grade, answer" in out.stdout and "memory: 1 note(s), summarised" in out.stdout
        assert "plan: retrieve, answer" in out.stdout
        (tmp_path / "bad.json").write_text("{not json")
        for bad in (tmp_path / "bad.json", tmp_path / "missing.json"):
            res = cli("trace", bad)
            assert res.returncode == 1 and res.stderr.startswith("error:") and "Traceback" not in res.stderr


@pytest.mark.slow
class TestInstalledCommand:
    """`switchyard` as pip installed it (setup.sh), run from a folder that is not the repository."""

    @staticmethod
    def run(*args, cwd):
        exe = ROOT / ".venv" / "bin" / "switchyard"
        if not exe.exists():
            pytest.skip("the switchyard command is not installed (run `bash setup.sh`)")
        return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd)

    def test_every_subcommand_starts_outside_the_repository(self, tmp_path):
        for sub in (
            "ingest",
            "ask",
            "trace",
            "graph",
            "search",
            "list",
            "delete",
            "eval-retrieval",
            "fit-adapter",
            "eval",
            "config",
        ):
            done = self.run(sub, "--help", cwd=tmp_path)
            assert done.returncode == 0 and "usage:" in done.stdout, (sub, done.stderr[-500:])
        done = self.run("config", "show", "--json", cwd=tmp_path)
        assert done.returncode == 0 and json.loads(done.stdout)["llm"]["backend"] == "local"
        assert self.run("graph", "--format", "mermaid", cwd=tmp_path).returncode == 0

    def test_ingest_and_ask_outside_the_repository(self, tmp_path):
        assert self.run("ingest", SAMPLES, "--no-progress", cwd=tmp_path).returncode == 0
        assert (tmp_path / ".switchyard" / "index").is_dir()  # the default index is relative to where it runs
        done = self.run("ask", "Who patented the knuckle coupler?", "--config", "no-llm", "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr  # a shipped config by its name
        assert "Janney" in json.loads(done.stdout)["answer"]
        done = self.run(
            "eval",
            ROOT / "tests" / "fixtures" / "tiny_qa" / "questions.jsonl",
            "--corpus",
            SAMPLES,
            "--configs",
            "no-llm.yaml",
            "--limit",
            "1",
            "--out",
            tmp_path / "out",
            "--no-progress",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "out" / "report.md").exists()
        done = self.run("ask", "x", "--config", "no-such-pipeline", cwd=tmp_path)
        assert done.returncode == 2 and "shipped configs:" in done.stderr and "Traceback" not in done.stderr
