"""A conversation on the command line as a user runs it: `cli.py chat` reading one question a line (real processes,
the no-LLM pipeline over a copy of the sample index), its threads on disk beside the index, `/reset` and `/sources`;
`ask --history FILE` and `search --history FILE`, and history files that are no good (one `error:` line)."""

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time

import pytest

from switchyard.conversation import MAX_MESSAGES
from tests.conftest import ROOT
from tests.test_cli import cli

QUESTION = "Who patented the knuckle coupler?"
FOLLOW_UP = "What year was that?"
NOT_FOUND = "Not found in the indexed documents."
HISTORY = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "Eli Janney [1]"}]


@pytest.fixture
def index(sample_index, tmp_path):
    """A private copy of the sample index: chat --thread writes its conversations beside it."""
    target = tmp_path / "index"
    shutil.copytree(sample_index, target)
    return target


def chat(index, *args, stdin: str):
    return cli("chat", "--config", "no-llm", "--index-dir", index, *args, stdin=stdin)


def lines(*questions: str) -> str:
    return "".join(f"{q}\n" for q in questions)


def assert_clean(out) -> None:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
class TestChat:
    def test_plain_answers_the_follow_up_with_the_first_turn(self, index):
        kept = index / ".switchyard-conversations.sqlite3"  # a server over the shared sample index may have made it
        before = kept.stat().st_mtime_ns if kept.exists() else None
        out = chat(index, "--plain", stdin=lines(QUESTION, FOLLOW_UP))
        assert_clean(out)
        assert out.stdout.splitlines() == ["Eli Janney", "1873"]
        assert (kept.stat().st_mtime_ns if kept.exists() else None) == before  # no --thread: nothing on disk

    def test_json_lines_carry_the_standalone_question(self, index):
        out = chat(index, "--json", stdin=lines(QUESTION, FOLLOW_UP))
        assert_clean(out)
        first, second = [json.loads(line) for line in out.stdout.splitlines()]
        assert first["short_answer"] == "Eli Janney" and "standalone" not in first and "thread_id" not in first
        assert second["short_answer"] == "1873" and second["question"] == FOLLOW_UP
        assert "coupler" in second["standalone"] and second["trace"][0]["node"] == "contextualize"

    def test_a_thread_resumes_in_another_process(self, index):
        first = chat(index, "--plain", "--thread", "rail", stdin=lines(QUESTION))
        assert_clean(first)
        assert first.stdout.splitlines() == ["Eli Janney"]
        assert (index / ".switchyard-conversations.sqlite3").is_file()  # beside the index
        second = chat(index, "--json", "--thread", "rail", stdin=lines(FOLLOW_UP))
        assert_clean(second)
        result = json.loads(second.stdout)
        assert result["short_answer"] == "1873" and result["thread_id"] == "rail"
        other = chat(index, "--plain", "--thread", "other", stdin=lines(FOLLOW_UP))
        assert_clean(other)
        assert other.stdout.splitlines() == [NOT_FOUND]

    def test_reset_forgets_the_conversation(self, index):
        out = chat(index, "--plain", stdin=lines(QUESTION, "/reset", FOLLOW_UP))
        assert_clean(out)
        assert out.stdout.splitlines() == ["Eli Janney", NOT_FOUND]
        assert "(a new conversation)" in out.stderr

    def test_reset_forgets_a_thread_on_disk_too(self, index):
        assert_clean(chat(index, "--plain", "--thread", "rail", stdin=lines(QUESTION, "/reset")))
        later = chat(index, "--plain", "--thread", "rail", stdin=lines(FOLLOW_UP))
        assert_clean(later)
        assert later.stdout.splitlines() == [NOT_FOUND]

    def test_a_failed_question_ends_a_script_but_not_a_person_s_session(self, tmp_path):
        missing = tmp_path / "no-index"  # every question fails: the collection does not exist
        piped = chat(missing, "--plain", stdin=lines(QUESTION, FOLLOW_UP))
        assert piped.returncode != 0 and piped.stderr.count("error: collection 'default' does not exist") == 1
        # at a terminal, each failed question is one error line and the session goes on until /quit
        primary, secondary = pty.openpty()
        command = [sys.executable, "cli.py", "chat", "--config", "no-llm", "--index-dir", str(missing)]
        proc = subprocess.Popen(command, cwd=ROOT, stdin=secondary, stdout=secondary, stderr=secondary)
        os.close(secondary)
        try:
            os.write(primary, lines(QUESTION, FOLLOW_UP, "/quit").encode())
            seen, deadline = b"", time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                if select.select([primary], [], [], 0.5)[0]:
                    try:
                        seen += os.read(primary, 4096)
                    except OSError:  # the terminal closed with the process
                        break
            assert proc.wait(timeout=30) == 0, seen
        finally:
            proc.kill()
            os.close(primary)
        text = seen.decode(errors="replace")
        assert text.count("error: collection 'default' does not exist") == 2 and "Traceback" not in text

    def test_sources_and_unknown_commands(self, index):
        out = chat(index, "--plain", stdin=lines("/sources", QUESTION, FOLLOW_UP, "/sources", "/frobnicate"))
        assert_clean(out)
        assert "(no answer yet)" in out.stderr and "unknown command /frobnicate" in out.stderr
        shown = out.stdout.splitlines()
        assert shown[:2] == ["Eli Janney", "1873"]
        assert shown[2].startswith("searched: What year was that?") and "coupler" in shown[2]
        assert shown[3].startswith("  [1] Railway couplers — ") and shown[3].endswith("couplers.html")

    def test_a_long_chat_keeps_going_past_the_history_limit(self, index):
        """More turns than a history may hold (MAX_MESSAGES): the chat keeps its newest turns and answers on."""
        questions = [f"What is standard gauge, question {i}?" for i in range(MAX_MESSAGES // 2 + 2)]
        out = chat(index, "--plain", stdin=lines(*questions, QUESTION, FOLLOW_UP))
        assert_clean(out)
        answers = out.stdout.splitlines()
        assert len(answers) == len(questions) + 2 and answers[-2:] == ["Eli Janney", "1873"]


@pytest.mark.slow
class TestHistoryFile:
    def test_ask_with_a_history_file_and_from_stdin(self, index, tmp_path):
        history = tmp_path / "history.json"
        history.write_text(json.dumps(HISTORY))
        out = cli("ask", FOLLOW_UP, "--history", history, "--config", "no-llm", "--index-dir", index)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("1873\n") and "(searched: What year was that?" in out.stderr
        jsonl = "\n".join(json.dumps(m) for m in HISTORY) + "\n"
        piped = cli(
            "ask", FOLLOW_UP, "--history", "-", "--config", "no-llm", "--index-dir", index, "--json", stdin=jsonl
        )
        assert piped.returncode == 0, piped.stderr
        assert json.loads(piped.stdout)["short_answer"] == "1873"
        alone = cli("ask", FOLLOW_UP, "--config", "no-llm", "--index-dir", index)
        assert alone.stdout.startswith(NOT_FOUND)

    def test_search_with_a_history_file(self, index, tmp_path):
        history = tmp_path / "history.json"
        history.write_text(json.dumps(HISTORY))
        out = cli("search", "Who made it?", "--history", history, "--json", "--config", "no-llm", "--index-dir", index)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["results"][0]["source"].endswith("couplers.html")

    @pytest.mark.parametrize(
        "content, said",
        [
            ('[{"role": "wizard", "content": "x"}]', "unknown role 'wizard'"),
            ("not json at all", "is not JSON"),
            ('{"role": "user", "content": "x"}\n{"role": "user"', "is not JSON"),
            ('"just a string"', "is not a message object"),
            ('[{"role": "user", "content": ""}]', "is empty"),
            ('[{"role": "user", "content": "x"}, 5]', "message 1 is not a message object"),
            (json.dumps([HISTORY[0]] * 201), "at most 200"),
            (None, "cannot read the history file"),
        ],
        ids=["role", "not-json", "bad-jsonl", "string", "empty", "not-a-message", "too-many", "missing"],
    )
    def test_a_bad_history_file_is_one_error_line(self, index, tmp_path, content, said):
        history = tmp_path / "history.json"
        if content is not None:
            history.write_text(content)
        assert_one_error_line(
            cli("ask", FOLLOW_UP, "--history", history, "--config", "no-llm", "--index-dir", index), said
        )

    def test_search_refuses_a_bad_history_file_too(self, index, tmp_path):
        history = tmp_path / "history.json"
        history.write_text('[{"role": "wizard", "content": "x"}]')
        out = cli("search", FOLLOW_UP, "--history", history, "--config", "no-llm", "--index-dir", index)
        assert_one_error_line(out, "unknown role 'wizard'")
        missing = cli("search", FOLLOW_UP, "--history", tmp_path / "nope.json", "--index-dir", index)
        assert_one_error_line(missing, "cannot read the history file")


def assert_one_error_line(out, said: str) -> None:
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.startswith("error: ") and said in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0
