"""The evaluation harness end to end: a tiny dataset over the sample corpus, two configs, resume, bad files."""

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from switchyard.errors import DatasetError
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.rows import EvalRow
from tests.conftest import FIXTURES, ROOT, SAMPLES, free_port

DATASET = FIXTURES / "tiny_qa" / "questions.jsonl"


def cli(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)], capture_output=True, text=True, timeout=900
    )


def _timeless(value):
    """A result line or report without what depends on timing (latency, the manifest's dates) or on whether the
    replies were replayed from the reply cache, for comparing runs."""
    if isinstance(value, dict):
        return {
            k: _timeless(v)
            for k, v in value.items()
            if "latency" not in k
            and k
            not in (
                "ms",
                "llm_ms",
                "total_ms",
                "router_ms",
                "action_ms",
                "run_id",
                "created",
                "updated",
                "cached_calls",
                "replayed_rows",
            )
        }
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@contextlib.contextmanager
def slow_server(delay_ms: int):
    """bench/slow_openai_server.py on a free 127.0.0.1 port: a stand-in for a remote model server."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "slow_openai_server.py"),
            "--port",
            str(port),
            "--delay-ms",
            str(delay_ms),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def write_phantomwiki(folder):
    """A two-article PhantomWiki-style dataset folder."""
    arts = [
        {"title": "Ann Lee", "article": "# Ann Lee\nThe friend of Ann Lee is Bo Chen."},
        {"title": "Bo Chen", "article": "# Bo Chen\nBo Chen likes chess."},
    ]
    qs = [
        {
            "id": "1",
            "question": "Who is the friend of Ann Lee?",
            "answer": ["Bo Chen"],
            "difficulty": 1,
            "type": 0,
            "solution_traces": json.dumps([{"Y_1": "Ann Lee", "Y_2": "Bo Chen"}]),
        }
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "articles.json").write_text(json.dumps(arts))
    (folder / "questions.json").write_text(json.dumps(qs))


@pytest.fixture
def configs(tmp_path):
    no_llm = ROOT / "configs" / "no-llm.yaml"
    bm25 = tmp_path / "no-llm-bm25.yaml"
    bm25.write_text(no_llm.read_text() + "retrieve:\n  mode: bm25\n")
    return [no_llm, bm25]


@pytest.mark.slow
class TestEvalCommand:
    def test_two_configs_two_runs_end_to_end(self, tmp_path, configs):
        out = tmp_path / "out"
        done = cli(
            "eval", DATASET, "--corpus", SAMPLES, "--configs", *configs, "--runs", "2", "--out", out, "--no-progress"
        )
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
        assert len(rows) == 2 * 2 * 4 and {r["config"] for r in rows} == {"no-llm", "no-llm-bm25"}
        q1 = next(r for r in rows if r["id"] == "q1" and r["config"] == "no-llm")
        assert "Janney" in q1["prediction"] and q1["contains"] == 1.0 and q1["trace"]
        report = json.loads((out / "report.json").read_text())
        f1 = report["configs"]["no-llm"]["f1"]
        assert f1["mean"] is not None and f1["sd"] == 0.0  # deterministic pipeline: identical runs
        assert report["configs"]["no-llm"]["llm_calls"]["mean"] == 0
        assert set(report["by_difficulty"]) == {"easy", "hard"} and set(report["by_type"]) >= {"who", "which"}
        md = (out / "report.md").read_text()
        assert "| f1 |" in md and "± 0.000" in md and "F1 / contains by difficulty" in md
        for png in (
            "accuracy_by_difficulty.png",
            "accuracy_vs_llm_calls.png",
            "accuracy_vs_tokens.png",
            "accuracy_vs_latency.png",
        ):
            assert (out / png).read_bytes()[:4] == b"\x89PNG" and f"]({png})" in md
        assert (out / "configs" / "no-llm-bm25.yaml").exists()

    def test_resume_after_interruption(self, tmp_path, configs):
        out = tmp_path / "out"
        assert (
            cli(
                "eval",
                DATASET,
                "--corpus",
                SAMPLES,
                "--configs",
                configs[0],
                "--limit",
                "2",
                "--out",
                out,
                "--no-progress",
            ).returncode
            == 0
        )
        results = out / "questions.jsonl"
        first = results.read_text().splitlines()
        assert len(first) == 2
        with results.open("a") as fh:  # a run killed mid-write leaves a torn line
            fh.write('{"config": "no-llm", "run": 0, "id": "q3", "predi')
        done = cli("eval", DATASET, "--corpus", SAMPLES, "--configs", configs[0], "--out", out, "--no-progress")
        assert done.returncode == 0, done.stderr
        lines = results.read_text().splitlines()
        assert lines[:2] == first  # the finished questions were not redone
        assert sorted(json.loads(x)["id"] for x in lines) == ["q1", "q2", "q3", "q4"]  # the torn line was redone

    def test_workers_give_the_rows_and_report_of_a_sequential_run(self, tmp_path, configs):
        reports, rows = {}, {}
        for workers in (1, 4):
            out = tmp_path / f"workers{workers}"
            done = cli(
                "eval",
                DATASET,
                "--corpus",
                SAMPLES,
                "--configs",
                *configs,
                "--runs",
                "2",
                "--out",
                out,
                "--index-dir",
                tmp_path / "index",
                "--workers",
                workers,
                "--no-progress",
            )
            assert done.returncode == 0, done.stderr
            lines = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
            rows[workers] = sorted((_timeless(r) for r in lines), key=lambda r: (r["config"], r["run"], r["id"]))
            reports[workers] = _timeless(json.loads((out / "report.json").read_text()))
        assert len(rows[4]) == 2 * 2 * 4 and rows[4] == rows[1]
        assert reports[4] == reports[1]

    def test_workers_against_a_model_server(self, tmp_path):
        """fixed.yaml through the openai backend, 4 questions in flight against a real HTTP server of ours."""
        with slow_server(delay_ms=50) as url:
            outs = []
            for workers in (1, 4):
                out = tmp_path / f"w{workers}"
                done = cli(
                    "eval",
                    DATASET,
                    "--corpus",
                    SAMPLES,
                    "--configs",
                    ROOT / "configs" / "fixed.yaml",
                    "--out",
                    out,
                    "--index-dir",
                    tmp_path / "index",
                    "--workers",
                    workers,
                    "--no-progress",
                    "--set",
                    "llm.backend=openai",
                    "--set",
                    f"llm.base_url={url}",
                    "--set",
                    "llm.model=slow-model",
                )
                assert done.returncode == 0, done.stderr
                outs.append(
                    sorted(
                        (r["id"], r["prediction"], r["llm_calls"], r["prompt_tokens"], r["error"])
                        for r in map(json.loads, (out / "questions.jsonl").read_text().splitlines())
                    )
                )
        assert outs[0] == outs[1] and all(row[2] == 2 and row[4] is None for row in outs[0])

    @pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
    def test_a_stopped_evaluation_keeps_the_vectors_of_the_rows_it_wrote(self, tmp_path, stop):
        """SIGTERM mid-run (a deployment or `pkill` stopping it), or kill -9 (no handler runs): the rows written
        replay without any model."""
        out, cache, vectors = tmp_path / "out", tmp_path / "llm-cache", tmp_path / "vectors"
        fixed = ROOT / "configs" / "fixed.yaml"
        with slow_server(delay_ms=1500) as url:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "cli.py"),
                    "eval",
                    DATASET,
                    "--corpus",
                    SAMPLES,
                    "--configs",
                    fixed,
                    "--out",
                    out,
                    "--index-dir",
                    tmp_path / "index",
                    "--no-progress",
                    "--llm-cache",
                    cache,
                    "--vector-cache",
                    vectors,
                    "--set",
                    "llm.backend=openai",
                    "--set",
                    f"llm.base_url={url}",
                    "--set",
                    "llm.model=slow-model",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            results = out / "questions.jsonl"
            deadline = time.time() + 600
            while (
                proc.poll() is None
                and time.time() < deadline
                and not (results.exists() and results.read_text().count("\n") >= 1)
            ):
                time.sleep(0.1)
            assert proc.poll() is None, "the evaluation ended before it could be stopped"
            proc.send_signal(stop)
            _, stderr = proc.communicate(timeout=120)
        if stop == signal.SIGTERM:
            assert proc.returncode == 128 + signal.SIGTERM and stderr.strip().splitlines()[-1] == "terminated"
            assert "Traceback" not in stderr
        else:
            assert proc.returncode == -signal.SIGKILL
        written = [json.loads(line) for line in results.read_text().splitlines()]
        assert 1 <= len(written) < 4 and [r["id"] for r in written] == [f"q{i + 1}" for i in range(len(written))]
        # no model and a fresh index: the passages and the questions come from the recorded vectors
        done = cli(
            "eval",
            DATASET,
            "--corpus",
            SAMPLES,
            "--configs",
            fixed,
            "--limit",
            len(written),
            "--out",
            tmp_path / "replayed",
            "--index-dir",
            tmp_path / "index2",
            "--no-progress",
            "--replay",
            "--llm-cache",
            cache,
            "--vector-cache",
            vectors,
            "--set",
            "llm.backend=openai",
            "--set",
            "llm.base_url=http://127.0.0.1:9/v1",
            "--set",
            "llm.model=slow-model",
        )
        assert done.returncode == 0, done.stderr
        replayed = [json.loads(line) for line in (tmp_path / "replayed" / "questions.jsonl").read_text().splitlines()]
        assert sorted((r["id"], r["prediction"]) for r in replayed) == [(r["id"], r["prediction"]) for r in written]

    def test_faithfulness_judged_by_the_real_local_model(self, tmp_path, configs):
        out = tmp_path / "out"
        args = [
            "eval",
            DATASET,
            "--corpus",
            SAMPLES,
            "--configs",
            configs[0],
            "--limit",
            "2",
            "--out",
            out,
            "--no-progress",
            "--judge",
            ROOT / "configs" / "fixed.yaml",
        ]
        done = cli(*args)
        assert done.returncode == 0, done.stderr
        judgements = [json.loads(x) for x in (out / "judgements.jsonl").read_text().splitlines()]
        assert sorted(j["id"] for j in judgements) == ["q1", "q2"]
        assert all(j["judge"].startswith("local:SmolLM2") for j in judgements)
        verdicts = [v for j in judgements for v in j["verdicts"]]
        assert verdicts and all(v["supported"] in (True, False, None) for v in verdicts)
        assert sum(j["judge_calls"] for j in judgements) >= sum(bool(v["cited"]) for v in verdicts) > 0
        assert "| faithfulness |" in (out / "report.md").read_text() and "judge local:SmolLM2" in done.stdout
        assert cli(*args).returncode == 0  # judged answers are not judged again
        assert (out / "judgements.jsonl").read_text().count("\n") == 2

    def test_retry_errors_asks_failed_questions_again(self, tmp_path, configs):
        out = tmp_path / "out"
        args = [
            "eval",
            DATASET,
            "--corpus",
            SAMPLES,
            "--configs",
            configs[0],
            "--limit",
            "2",
            "--out",
            out,
            "--no-progress",
        ]
        assert cli(*args).returncode == 0
        results = out / "questions.jsonl"
        rows = [json.loads(x) for x in results.read_text().splitlines()]
        rows[1].update(error="LLMError: server down", prediction="")
        results.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert cli(*args).returncode == 0
        assert json.loads(results.read_text().splitlines()[1])["error"]  # a plain resume keeps the failure
        before = results.read_text()
        refused = cli(*args, "--set", "retrieve.top_k=7", "--retry-errors")  # another setup: refused
        assert refused.returncode != 0 and "different setup" in refused.stderr
        assert results.read_text() == before  # and the failed row is still there: a refused retry drops nothing
        assert cli(*args, "--retry-errors").returncode == 0
        lines = [json.loads(x) for x in results.read_text().splitlines()]
        assert [r["id"] for r in lines] == ["q1", "q2"] and not any(r["error"] for r in lines)
        assert "Janney" in lines[0]["prediction"] and lines[1]["prediction"]

    @pytest.mark.parametrize(
        "content, message",
        [
            ("{not json\n", "invalid JSON"),
            ('{"id": "x", "question": "q?"}\n', "unknown format"),
            ('{"id": "x", "question": "q?", "answers": []}\n', "non-empty list"),
        ],
    )
    def test_bad_dataset_files(self, tmp_path, configs, content, message):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        done = cli("eval", bad, "--corpus", SAMPLES, "--configs", configs[0], "--out", tmp_path / "o")
        assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr

    def test_a_copy_of_an_evaluated_dataset_in_the_same_index_dir_is_a_clear_error(self, tmp_path, configs):
        # a PhantomWiki article's id is its title: the copy's documents are already indexed from the first folder
        first, copy = tmp_path / "first", tmp_path / "copy"
        write_phantomwiki(first)
        shutil.copytree(first, copy)
        args = ["eval", "--configs", configs[0], "--index-dir", tmp_path / "index"]
        assert cli(*args, first, "--out", tmp_path / "a").returncode == 0
        done = cli(*args, copy, "--out", tmp_path / "b")
        assert done.returncode != 0 and "Traceback" not in done.stderr and "unexpected" not in done.stderr
        assert f"nothing could be ingested from {copy / 'articles.json'} into {tmp_path / 'index'}" in done.stderr
        assert "already indexed from" in done.stderr

    def test_missing_corpus_and_bad_config(self, tmp_path, configs):
        done = cli("eval", DATASET, "--configs", configs[0], "--out", tmp_path / "o")
        assert done.returncode != 0 and "needs --corpus" in done.stderr
        bad = tmp_path / "bad.yaml"
        bad.write_text("graph: {mode: sideways}\n")
        done = cli("eval", DATASET, "--corpus", SAMPLES, "--configs", bad, "--out", tmp_path / "o")
        assert done.returncode == 2 and "bad.yaml: graph.mode" in done.stderr
        done = cli(
            "eval", DATASET, "--corpus", SAMPLES, "--configs", configs[0], "--judge", bad, "--out", tmp_path / "o"
        )
        assert done.returncode == 2 and "bad.yaml: graph.mode" in done.stderr and not (tmp_path / "o").exists()
        done = cli(
            "eval",
            DATASET,
            "--corpus",
            SAMPLES,
            "--configs",
            configs[0],
            "--baseline",
            "agent",
            "--out",
            tmp_path / "o",
        )
        assert done.returncode == 2 and "--baseline agent is not one of" in done.stderr


class TestDatasets:
    def test_phantomwiki_style_folder(self, tmp_path):
        write_phantomwiki(tmp_path)
        ds = load_dataset(tmp_path)
        q = ds.questions[0]
        assert q.is_list and q.answers == ["Bo Chen"] and q.gold_doc_ids == ["Ann Lee", "Bo Chen"]
        assert q.difficulty == "1" and ds.corpus == [tmp_path / "articles.json"]

    def test_hotpotqa_builds_a_corpus(self, tmp_path):
        rec = {
            "id": "h1",
            "question": "q?",
            "answer": "yes",
            "type": "comparison",
            "level": "hard",
            "supporting_facts": {"title": ["A"], "sent_id": [0]},
            "context": {"title": ["A", "B"], "sentences": [["A is one.", " A is two."], ["B is."]]},
        }
        path = tmp_path / "h.jsonl"
        path.write_text(json.dumps(rec) + "\n")
        ds = load_dataset(path, cache_dir=tmp_path / "cache")
        assert ds.questions[0].gold_doc_ids == ["A"] and ds.questions[0].type == "comparison"
        corpus = [json.loads(x) for x in ds.corpus[0].read_text().splitlines()]
        assert corpus == [
            {"_id": "A", "title": "A", "text": "A is one. A is two."},
            {"_id": "B", "title": "B", "text": "B is."},
        ]

    def test_missing_pieces(self, tmp_path):
        with pytest.raises(DatasetError, match="articles.json and questions.json"):
            load_dataset(tmp_path)
        with pytest.raises(DatasetError, match="not found"):
            load_dataset(tmp_path / "nope.jsonl")


class TestReport:
    def _row(self, config, run, qid, f1, abstained=False, recall=None, difficulty="1"):
        return EvalRow(
            config=config,
            run=run,
            id=qid,
            exact_match=float(f1 == 1),
            f1=f1,
            contains=f1,
            gold_recall=recall,
            citation_precision=None,
            abstained=abstained,
            latency_ms=100.0 * (run + 1),
            llm_calls=2,
            prompt_tokens=10,
            completion_tokens=5,
            parse_fallbacks=0,
            guards={"repeat": 1},
            error=None,
            difficulty=difficulty,
            type="t",
        )

    def test_mean_and_sample_sd_over_runs(self):
        from switchyard.evaluation.report import aggregate

        rows = [
            self._row("a", 0, "q1", 1.0),
            self._row("a", 0, "q2", 0.0),  # run 0: mean f1 0.5
            self._row("a", 1, "q1", 1.0),
            self._row("a", 1, "q2", 1.0),
        ]  # run 1: mean f1 1.0
        rep = aggregate(rows)["configs"]["a"]
        assert rep["f1"]["mean"] == pytest.approx(0.75)
        assert rep["f1"]["sd"] == pytest.approx(0.3535534, rel=1e-5)  # stdev([0.5, 1.0])
        assert rep["guard_activations"]["mean"] == 1.0 and rep["runs"] == 2 and rep["questions"] == 2

    def test_breakdowns_show_f1_and_contains_and_plots_take_a_metric(self, tmp_path):
        from switchyard.evaluation.report import write_report

        rows = [
            self._row("a", 0, "q1", 1.0, difficulty="1"),
            self._row("a", 0, "q2", 0.0, difficulty="2").model_copy(update={"contains": 0.5}),
        ]
        report = write_report(rows, tmp_path, "t", plot_metric="contains")
        md = (tmp_path / "report.md").read_text()
        assert "| 2 | 0.000 / 0.500 (n=1) |" in md and report["by_difficulty"]["1"]["a"]["contains"] == 1.0
        assert (tmp_path / "accuracy_by_difficulty.png").read_bytes()[:4] == b"\x89PNG"
        with pytest.raises(ValueError, match="plot_metric"):
            write_report(rows, tmp_path, "t", plot_metric="latency")

    def test_latency_is_over_the_questions_the_model_answered(self):
        from switchyard.evaluation.report import aggregate

        rows = [
            self._row("a", 0, "q1", 1.0).model_copy(update={"latency_ms": 4000.0}),
            self._row("a", 0, "q2", 1.0).model_copy(update={"latency_ms": 6000.0}),
            # replies from the reply cache (one of two calls is enough): a file read's latency, left out
            self._row("a", 0, "q3", 1.0).model_copy(update={"latency_ms": 3.0, "cached_calls": 1}),
            self._row("a", 0, "q4", 1.0).model_copy(update={"latency_ms": 2.0, "cached_calls": 2}),
        ]
        rep = aggregate(rows)["configs"]["a"]
        assert rep["latency_p50_ms"]["mean"] == 5000.0 and rep["latency_p95_ms"]["mean"] == pytest.approx(5900.0)
        assert rep["replayed_rows"]["mean"] == 2 and rep["llm_calls"]["mean"] == 2  # still counted as calls

    def test_a_config_replayed_in_full_has_no_latency_and_no_latency_plot(self, tmp_path):
        from switchyard.evaluation.report import write_report

        rows = [
            self._row(name, 0, q, 1.0).model_copy(update={"latency_ms": 2.0, "cached_calls": 2})
            for name in ("a", "b")
            for q in ("q1", "q2")
        ]
        report = write_report(rows, tmp_path, "t")
        assert report["configs"]["a"]["latency_p50_ms"] == {"mean": None, "sd": None}
        assert "| latency_p50_ms | – | – |" in (tmp_path / "report.md").read_text()
        assert "accuracy_vs_latency.png" not in [f["file"] for f in report["plots"]["files"]]
        assert set(report["plots"]["frontier"]) == {"llm_calls", "tokens"}
        assert not (tmp_path / "accuracy_vs_latency.png").exists()

    def test_a_replayed_config_is_left_off_the_latency_plot_not_drawn_at_zero(self, tmp_path):
        from switchyard.evaluation.report import write_report

        rows = [
            self._row("replayed", 0, q, 1.0).model_copy(update={"latency_ms": 2.0, "cached_calls": 2})
            for q in ("q1", "q2")
        ] + [self._row("model", 0, q, 0.5) for q in ("q1", "q2")]
        report = write_report(rows, tmp_path, "t")
        assert report["plots"]["frontier"]["latency_p50_ms"] == ["model"]
        assert report["plots"]["frontier"]["llm_calls"] == ["replayed"]  # the other plots keep every config
        assert (tmp_path / "accuracy_vs_latency.png").read_bytes()[:4] == b"\x89PNG"

    def test_paired_differences_against_the_baseline(self):
        from switchyard.evaluation.report import aggregate, markdown

        rows = [
            self._row("fixed", 0, "q1", 1.0),
            self._row("fixed", 0, "q2", 0.0),
            self._row("fixed", 0, "q3", 0.5),
            self._row("agent", 0, "q1", 0.0),
            self._row("agent", 0, "q2", 1.0),
            self._row("agent", 0, "q3", 0.5),
            self._row("better", 0, "q1", 1.0),
            self._row("better", 0, "q2", 0.5),
            self._row("better", 0, "q3", 1.0),
        ]
        report = aggregate(rows)
        assert report["baseline"] == "fixed" and set(report["paired"]) == {"agent", "better"}
        agent = report["paired"]["agent"]["f1"]
        assert agent["diff"] == 0.0 and (agent["wins"], agent["losses"], agent["ties"], agent["n"]) == (1, 1, 1, 3)
        assert agent["ci95"][0] < 0 < agent["ci95"][1]
        better = report["paired"]["better"]["contains"]
        assert better["diff"] == pytest.approx(1 / 3) and better["ci95"][0] >= 0 and better["wins"] == 2
        assert better["mean_diff"] == better["diff"] and better["p_holm"] >= better["p"]
        assert better["minimum_detectable_difference"] > 0 and report["mcnemar"]["better"]["exact_match"]["b"] == 1
        md = markdown(report, "t")
        assert "## Paired against fixed" in md and "| agent | f1 | +0.000 [" in md and "MDE (80% power)" in md
        assert aggregate(rows, baseline="agent")["paired"]["fixed"]["f1"]["diff"] == 0.0
        with pytest.raises(ValueError, match="baseline"):
            aggregate(rows, baseline="nope")

    def test_errors_and_timeouts_are_counted(self):
        from switchyard.evaluation.report import run_metrics

        rows = [
            self._row("a", 0, "q1", 1.0),
            self._row("a", 0, "q2", 0.0).model_copy(
                update={"error": "LLMError: LLM backend x failed after 3 tries (timed out after 60.0s)"}
            ),
            self._row("a", 0, "q3", 0.0).model_copy(update={"error": "LLMError: refused the request (HTTP 400)"}),
        ]
        m = run_metrics(rows)
        assert m["errors"] == 2 and m["timeouts"] == 1

    def test_scores_are_recomputed_from_the_stored_line(self):
        row = EvalRow(
            config="a",
            run=0,
            id="q",
            prediction="I do not know [1].",
            abstained=False,
            answers=["no"],
            is_list=False,
            gold_doc_ids=["A", "B"],
            retrieved_doc_ids=["A", "C"],
            citations=[{"doc_id": "C"}],
            contains=1.0,
            error=None,
        )  # as an older substring scorer stored it
        assert row.scores() == {
            "exact_match": 0.0,
            "f1": 0.0,
            "contains": 0.0,
            "gold_recall": 0.5,
            "citation_precision": 0.0,
        }
        assert row.rescored().contains == 0.0
        assert row.model_copy(update={"abstained": True}).scores()["f1"] == 0.0
        assert row.model_copy(update={"error": "LLMError: down"}).scores()["gold_recall"] is None

    def test_correct_abstention_needs_gold_information(self):
        from switchyard.evaluation.report import run_metrics

        searched = {"retrieved_doc_ids": ["x", "y"]}
        rows = [
            self._row("a", 0, "q1", 0.0, abstained=True, recall=0.0).model_copy(update=searched),  # correct
            self._row("a", 0, "q2", 0.0, abstained=True, recall=0.5).model_copy(update=searched),  # gold there
            self._row("a", 0, "q3", 0.0, abstained=True, recall=0.0),  # gave up without searching
            self._row("a", 0, "q4", 0.0, abstained=True, recall=None),
        ]  # no gold documents known
        m = run_metrics(rows)
        assert m["abstention_rate"] == 1.0 and m["correct_abstention_rate"] == pytest.approx(1 / 3)
