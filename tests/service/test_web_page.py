"""The web page (service/static) in a real headless Chromium against a real `cli.py serve`: streaming runs,
clickable citations, side-by-side runs, conversations (follow-ups), and the API-token field.

Needs Debian's `chromium` and `chromium-driver` packages and the `selenium` package; skipped without them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

import pytest

from tests.conftest import ROOT
from tests.service.conftest import running_server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
QUESTION = "Who patented the knuckle coupler?"
FOLLOW_UP = "What year was that?"  # answerable only after QUESTION
SCREENSHOT = os.environ.get("SWITCHYARD_WEB_SCREENSHOT")  # a PNG path: the two-turn chat is saved there
FINAL = ("done", "abstained", "error", "stopped")
RUN_TIMEOUT_S = 120


def _missing() -> str | None:
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.path.exists(path):
            return f"{path} is missing (apt-get install {package})"
    try:
        import selenium  # noqa: F401
    except ImportError as exc:
        return f"selenium does not import ({exc}); pip install selenium"
    return None


MISSING = _missing()
if MISSING is None:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"no headless browser: {MISSING}")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, with a throwaway profile."""
    profile = tempfile.mkdtemp(prefix="switchyard-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver, condition, timeout: float = 20, message: str = ""):
    return WebDriverWait(
        driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition, message)


def open_page(driver, url: str, expect_lists: bool = True) -> None:
    driver.get(url + "/")
    driver.get_log("browser")  # start each test with an empty console log
    if expect_lists:
        wait(driver, lambda d: Select(d.find_element(By.ID, "pipeline")).options, message="pipelines not loaded")


def run_status(driver, slot: str) -> str | None:
    runs = driver.find_elements(By.ID, f"run-{slot}")
    return runs[0].get_attribute("data-status") if runs else None


def ask(driver, question: str, pipeline: str, slots=("a",), finish: bool = True) -> None:
    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    Select(driver.find_element(By.ID, "pipeline")).select_by_value(pipeline)
    driver.find_element(By.ID, "ask").click()
    if finish:
        wait(
            driver,
            lambda d: all(run_status(d, s) in FINAL for s in slots),
            RUN_TIMEOUT_S,
            f"no final answer in {RUN_TIMEOUT_S} s",
        )


def metric(driver, slot: str, name: str) -> tuple[str, float]:
    """A run column's metric: (shown text, raw value)."""
    box = driver.find_element(By.CSS_SELECTOR, f'#run-{slot} [data-metric="{name}"]')
    return box.find_element(By.TAG_NAME, "dd").text, float(box.get_attribute("data-value"))


def node_states(driver, slot: str) -> dict[str, str]:
    items = driver.find_elements(By.CSS_SELECTOR, f'#run-{slot} [data-role="nodes"] li')
    return {li.get_attribute("data-node"): li.get_attribute("data-state") for li in items}


def js_errors(driver) -> list[str]:
    """Uncaught exceptions and console errors, leaving out the browser's own lines for failed HTTP requests."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]
    ]


def record_requests(driver) -> None:
    """From now on the page's /v1/ask bodies are kept in window.sentBodies (read them with sent_bodies)."""
    driver.execute_script("""
        window.sentBodies = [];
        const original = window.fetch;
        window.fetch = function (url, options) {
          if (String(url).includes('v1/ask')) window.sentBodies.push(JSON.parse(options.body));
          return original.apply(this, arguments);
        };""")


def sent_bodies(driver) -> list[dict]:
    return driver.execute_script("return window.sentBodies")


def turns(driver) -> list:
    return driver.find_elements(By.CSS_SELECTOR, "#conversation .turn")


def turn_answer(turn, slot: str = "a") -> str:
    return turn.find_element(By.CSS_SELECTOR, f'.run[data-run="{slot}"] [data-role="answer"]').text


def squeeze(text: str) -> str:
    """Text without whitespace: the page shows "Janney[1]" (a citation hugs its sentence) for "Janney [1]"."""
    return re.sub(r"\s+", "", text)


SSE_SAMPLE = (
    'event: run_start\r\ndata: {"run_id": "r1"}\r\n\r\n'
    ": ping - 2026-01-01 00:00:00\r\n\r\n"
    'event: token\r\ndata: {"text": "caf\\u00e9 \\u2014 [1]"}\r\n\r\n'
    'event: passages\ndata: {"a":\ndata: 1}\n\n'
    'data: {"plain": true}\r\r'
    'event: answer\r\ndata: {"result": {"answer": "done"}}\r\n'
)  # no blank line at the end


@pytest.mark.slow
class TestWebPage:
    def test_sse_parser_handles_any_chunking(self, browser, server):
        """The page's own SSE parser: CRLF / LF / CR line ends, comments, multi-line data, chunks split anywhere
        (a CRLF split in two included) and a last event without its blank line."""
        open_page(browser, server.url)
        results = browser.execute_script(
            """
            const text = arguments[0];
            const parse = (chunks) => {
              const out = [];
              const p = new window.Switchyard.SSEParser((type, data) => out.push([type, data]));
              chunks.forEach((c) => p.feed(c));
              p.end();
              return JSON.stringify(out);
            };
            const all = [parse([text])];
            for (let i = 1; i < text.length; i++) all.push(parse([text.slice(0, i), text.slice(i)]));
            all.push(parse(Array.from(text)));
            return all;
        """,
            SSE_SAMPLE,
        )
        expected = [
            ["run_start", '{"run_id": "r1"}'],
            ["token", '{"text": "caf\\u00e9 \\u2014 [1]"}'],
            ["passages", '{"a":\n1}'],
            ["message", '{"plain": true}'],
            ["answer", '{"result": {"answer": "done"}}'],
        ]
        for i, got in enumerate(results):
            assert json.loads(got) == expected, f"split variant {i}"

    def test_conversation_messages_per_column(self, browser, server):
        """The page's rule for a column's earlier turns: each question with that column's own answer (an abstention
        as its text); a column without an answer for a turn borrows the left column's; a turn with none is left out."""
        open_page(browser, server.url)
        got = browser.execute_script(
            """
            const turns = [
              {question: "q1", views: {a: {result: {answer: "left 1 [1]"}}, b: {result: {answer: "right 1"}}}},
              {question: "q2", views: {a: {result: {answer: "Not found.", abstained: true}}}},  // b not shown
              {question: "q3", views: {a: {result: null}, b: {result: null}}},  // both stopped
              {question: "q4", views: {a: {result: {answer: "left 4"}}, b: {result: null}}},  // b failed
            ];
            const messages = window.Switchyard.conversationMessages;
            return {a: messages(turns, "a"), b: messages(turns, "b"), none: messages([], "a")};
        """
        )

        def conversation(*pairs):
            return [m for q, a in pairs for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})]

        assert got["a"] == conversation(("q1", "left 1 [1]"), ("q2", "Not found."), ("q4", "left 4"))
        assert got["b"] == conversation(("q1", "right 1"), ("q2", "Not found."), ("q4", "left 4"))
        assert got["none"] == []

    def test_ask_streams_and_cites(self, browser, server):
        open_page(browser, server.url)
        ask(browser, QUESTION, "no-llm")
        assert run_status(browser, "a") == "done", browser.find_element(By.ID, "run-a").text
        answer = browser.find_element(By.ID, "answer")
        assert "Janney" in answer.text
        assert "provisional" not in answer.get_attribute("class")

        nodes = node_states(browser, "a")
        for node in ("retrieve", "rerank", "grade", "answer"):
            assert nodes.get(node) == "done", nodes
        passages = browser.find_elements(By.CSS_SELECTOR, '#run-a [data-role="passages"] .passage-title')
        titles = [e.text for e in passages]
        assert "Railway couplers" in titles
        text, latency = metric(browser, "a", "latency")
        assert latency > 0 and text.endswith("s")
        assert metric(browser, "a", "llm-calls") == ("0", 0)
        sources = browser.find_elements(By.CSS_SELECTOR, '#run-a [data-role="sources"] li')
        assert sources and "Railway couplers" in sources[0].text

        citations = answer.find_elements(By.CSS_SELECTOR, ".citation")
        assert citations, answer.get_attribute("outerHTML")
        assert citations[0].text == "[1]"
        panel = browser.find_element(By.ID, "passage-panel")
        assert not panel.is_displayed()
        citations[0].click()
        wait(browser, lambda d: panel.is_displayed(), message="the passage panel did not open")
        assert browser.find_element(By.ID, "passage-title").text == "Railway couplers"
        passage = browser.find_element(By.ID, "passage-text").text
        assert "knuckle coupler" in passage and "Eli Janney" in passage
        assert "couplers.html" in browser.find_element(By.ID, "passage-source").text
        browser.find_element(By.ID, "passage-close").click()
        wait(browser, lambda d: not panel.is_displayed(), message="the passage panel did not close")
        assert js_errors(browser) == []

    def test_abstention_is_shown(self, browser, server):
        open_page(browser, server.url)
        ask(browser, "What is the boiling point of mercury on Mars?", "no-llm")
        assert run_status(browser, "a") == "abstained"
        assert browser.find_element(By.CSS_SELECTOR, "#run-a .abstain-tag").is_displayed()
        assert "Not found" in browser.find_element(By.ID, "answer").text
        assert not browser.find_elements(By.CSS_SELECTOR, "#answer .citation")
        assert not browser.find_element(By.CSS_SELECTOR, "#run-a .sources-box").is_displayed()

    def test_errors_are_shown(self, browser, server):
        """An HTTP error before the stream (here 404, an unknown pipeline) is shown with the server's detail."""
        open_page(browser, server.url)
        browser.execute_script("""
            const select = document.getElementById('pipeline');
            select.append(new Option('nope', 'nope'));""")
        ask(browser, QUESTION, "nope")
        assert run_status(browser, "a") == "error"
        error = browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="error"]')
        assert "404" in error.text and "unknown pipeline 'nope'" in error.text
        assert browser.find_element(By.ID, "ask").is_enabled()

    def test_stop(self, browser, server):
        """Stop ends the run in the page and on the server (its run slot is given back); the next question works."""
        open_page(browser, server.url)
        ask(browser, QUESTION, "fixed", finish=False)
        wait(browser, lambda d: "running" in node_states(d, "a").values(), message="the run did not start")
        stop = browser.find_element(By.ID, "stop")
        assert stop.is_displayed() and not browser.find_element(By.ID, "ask").is_enabled()
        stop.click()
        wait(browser, lambda d: run_status(d, "a") == "stopped", message="the run was not stopped")
        assert "stopped" in browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="error"]').text
        assert not stop.is_displayed() and browser.find_element(By.ID, "ask").is_enabled()
        with server.client() as c:
            wait(
                browser,
                lambda d: "switchyard_runs_in_flight 0.0" in c.get("/metrics").text,
                30,
                "the server kept the stopped run's slot",
            )
        ask(browser, QUESTION, "no-llm")
        assert run_status(browser, "a") == "done" and "Janney" in browser.find_element(By.ID, "answer").text

    def test_side_by_side(self, browser, server):
        open_page(browser, server.url)
        assert not browser.find_element(By.ID, "pipeline-b").is_displayed()
        browser.find_element(By.CSS_SELECTOR, "label[for=compare]").click()
        Select(browser.find_element(By.ID, "pipeline-b")).select_by_value("fixed")
        ask(browser, QUESTION, "no-llm", slots=("a", "b"))

        left, right = browser.find_element(By.ID, "run-a"), browser.find_element(By.ID, "run-b")
        assert left.location["y"] == right.location["y"] and left.location["x"] < right.location["x"]
        assert left.find_element(By.CLASS_NAME, "run-pipeline").text == "no-llm"
        assert right.find_element(By.CLASS_NAME, "run-pipeline").text == "fixed"
        for slot in ("a", "b"):
            assert run_status(browser, slot) in ("done", "abstained"), browser.find_element(By.ID, f"run-{slot}").text
            answer = browser.find_element(By.CSS_SELECTOR, f'#run-{slot} [data-role="answer"]')
            assert answer.text.strip()
            text, latency = metric(browser, slot, "latency")
            assert latency > 0 and "…" not in text
        assert "Janney" in browser.find_element(By.ID, "answer").text
        assert metric(browser, "a", "llm-calls")[1] == 0
        assert metric(browser, "b", "llm-calls")[1] >= 1
        assert js_errors(browser) == []

    def test_conversation_follow_up(self, browser, server):
        """Turns stay on the page; a follow-up is sent with the earlier turns (question and verified answer, as
        text) and shows the standalone question retrieval searched; "New conversation" forgets the turns."""
        open_page(browser, server.url)
        record_requests(browser)
        new_conversation = browser.find_element(By.ID, "new-conversation")
        assert not new_conversation.is_enabled() and browser.find_element(By.ID, "empty").is_displayed()
        ask(browser, QUESTION, "no-llm")
        assert run_status(browser, "a") == "done" and "Janney" in browser.find_element(By.ID, "answer").text
        assert not browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="standalone"]').is_displayed()
        assert "messages" not in sent_bodies(browser)[0]
        assert "1 earlier turn" in browser.find_element(By.ID, "turn-count").text
        assert browser.find_element(By.ID, "question").get_attribute("value") == ""  # the box is ready for the next

        ask(browser, FOLLOW_UP, "no-llm")
        assert run_status(browser, "a") == "done", browser.find_element(By.ID, "run-a").text
        first, second = turns(browser)
        assert first.find_element(By.CSS_SELECTOR, '[data-role="question"]').text == QUESTION
        assert second.find_element(By.CSS_SELECTOR, '[data-role="question"]').text == FOLLOW_UP
        assert "Janney" in turn_answer(first) and "1873" in turn_answer(second)
        assert "1873" in browser.find_element(By.ID, "answer").text  # #answer / #run-a: the newest turn's
        assert second.location["y"] > first.location["y"]  # newest at the bottom
        standalone = browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="standalone"]')
        assert standalone.is_displayed() and standalone.text.startswith("searched:")
        assert "knuckle coupler" in standalone.text
        messages = sent_bodies(browser)[1]["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"] and messages[0]["content"] == QUESTION
        assert "Eli Janney [1]" in messages[1]["content"]  # the verified answer's text, [n] markers included
        assert squeeze(messages[1]["content"]) == squeeze(turn_answer(first))
        assert "2 earlier turns" in browser.find_element(By.ID, "turn-count").text

        # the earlier turn folds its metrics and trace away behind "details"; its citations still open
        earlier = first.find_element(By.CSS_SELECTOR, ".run")
        assert earlier.get_attribute("id") == "" and "collapsed" in earlier.get_attribute("class")
        assert not earlier.find_element(By.CSS_SELECTOR, ".metrics").is_displayed()
        if SCREENSHOT:
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(SCREENSHOT)
        earlier.find_element(By.CSS_SELECTOR, '[data-role="details-toggle"]').click()
        assert earlier.find_element(By.CSS_SELECTOR, ".metrics").is_displayed()
        first.find_element(By.CSS_SELECTOR, ".citation").click()
        panel = browser.find_element(By.ID, "passage-panel")
        wait(browser, lambda d: panel.is_displayed(), message="an earlier turn's citation did not open")
        browser.find_element(By.ID, "passage-close").click()
        wait(browser, lambda d: not panel.is_displayed(), message="the passage panel did not close")

        new_conversation.click()
        assert turns(browser) == [] and browser.find_element(By.ID, "empty").is_displayed()
        assert not new_conversation.is_enabled() and not browser.find_element(By.ID, "turn-count").is_displayed()
        ask(browser, FOLLOW_UP, "no-llm")
        assert run_status(browser, "a") == "abstained" and len(turns(browser)) == 1
        assert "messages" not in sent_bodies(browser)[2]
        assert not browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="standalone"]').is_displayed()
        assert js_errors(browser) == []

    def test_conversation_side_by_side(self, browser, server):
        """Side by side, each column sends its own earlier answers, and each answers the follow-up."""
        open_page(browser, server.url)
        record_requests(browser)
        browser.find_element(By.CSS_SELECTOR, "label[for=compare]").click()
        Select(browser.find_element(By.ID, "pipeline-b")).select_by_value("fixed")
        ask(browser, QUESTION, "no-llm", slots=("a", "b"))
        ask(browser, FOLLOW_UP, "no-llm", slots=("a", "b"))
        first, second = turns(browser)
        left, right = browser.find_element(By.ID, "run-a"), browser.find_element(By.ID, "run-b")
        assert left.location["y"] == right.location["y"] and left.location["x"] < right.location["x"]
        for slot in ("a", "b"):
            assert run_status(browser, slot) == "done", browser.find_element(By.ID, f"run-{slot}").text
            assert "Janney" in turn_answer(first, slot) and "1873" in turn_answer(second, slot)
            standalone = browser.find_element(By.CSS_SELECTOR, f'#run-{slot} [data-role="standalone"]')
            assert standalone.is_displayed() and "searched:" in standalone.text
        # (here both columns' first answers read the same: which column sends which is the test above)
        follow_ups = {body["pipeline"]: body for body in sent_bodies(browser)[2:]}
        assert set(follow_ups) == {"no-llm", "fixed"}
        for slot, pipeline in (("a", "no-llm"), ("b", "fixed")):
            messages = follow_ups[pipeline]["messages"]
            assert messages[0] == {"role": "user", "content": QUESTION} and messages[1]["role"] == "assistant"
            assert squeeze(messages[1]["content"]) == squeeze(turn_answer(first, slot))  # its own answer
        assert js_errors(browser) == []

    def test_every_shipped_pipeline_is_listed(self, browser, index_copy, tmp_path):
        """Every shipped config served together: the page lists each with its graph mode, closed-book's included
        (GET /v1/pipelines once answered 500 for it, and the page could list none)."""
        shipped = sorted(path.stem for path in (ROOT / "configs").glob("*.yaml"))
        configs = [arg for name in shipped for arg in ("--config", name)]
        with running_server(tmp_path, index_copy, *configs, "--no-warm-up") as srv:
            open_page(browser, srv.url)
            for select in ("pipeline", "pipeline-b"):
                options = Select(browser.find_element(By.ID, select)).options
                assert [o.get_attribute("value") for o in options] == shipped
            labels = {o.get_attribute("value"): o.get_attribute("textContent") for o in options}
            assert labels["closed-book"] == "closed-book (closed book)"
            assert labels["fixed"] == "fixed (fixed)" and labels["agent-approve"] == "agent-approve (agent)"
            assert browser.find_element(By.ID, "server-status").text.startswith(f"{len(shipped)} pipelines")
            assert not browser.find_element(By.ID, "error").is_displayed()
            assert js_errors(browser) == []

    def test_api_token(self, browser, module_index, tmp_path_factory):
        with running_server(
            tmp_path_factory.mktemp("srv-token"), module_index, "--config", "no-llm", token="s3cret"
        ) as secured:
            open_page(browser, secured.url, expect_lists=False)
            banner = browser.find_element(By.ID, "error")
            wait(browser, lambda d: banner.is_displayed(), message="no message about the missing token")
            assert "Unauthorized" in banner.text and "token" in banner.text
            assert "token needed" in browser.find_element(By.ID, "server-status").text

            token = browser.find_element(By.ID, "token")
            token.send_keys("wrong", Keys.ENTER)
            wait(browser, lambda d: "rejected" in banner.text, message="a wrong token was not reported")

            token.clear()
            token.send_keys("s3cret", Keys.ENTER)
            wait(browser, lambda d: Select(d.find_element(By.ID, "pipeline")).options, message="lists not loaded")
            assert not banner.is_displayed()
            assert browser.execute_script("return localStorage.getItem('switchyard.apiToken')") == "s3cret"

            browser.refresh()  # the token is remembered
            wait(browser, lambda d: Select(d.find_element(By.ID, "pipeline")).options, message="lists not loaded")
            assert browser.find_element(By.ID, "token").get_attribute("value") == "s3cret"
            ask(browser, QUESTION, "no-llm")
            assert run_status(browser, "a") == "done"
            assert "Janney" in browser.find_element(By.ID, "answer").text

    def test_approve_each_action_to_the_answer(self, browser, index_copy, tmp_path):
        """A pipeline that pauses for approval (graph.router.approve): the pending action is shown with Approve /
        Edit / Reject; a bad edit is said and the run stays paused; Approve goes on until the answer."""
        from tests.nodes.scripted import zeroshot_agent
        from tests.scripted_openai_server import ScriptedOpenAIServer

        llm = ScriptedOpenAIServer(zeroshot_agent)
        try:
            with running_server(
                tmp_path,
                index_copy,
                "--config",
                "agent-approve",
                "--set",
                "llm.backend=openai",
                "--set",
                f"llm.base_url={llm.url}",
            ) as srv:
                open_page(browser, srv.url)
                ask(browser, QUESTION, "agent-approve", finish=False)
                box = browser.find_element(By.CSS_SELECTOR, '#run-a [data-role="approval"]')
                wait(browser, lambda d: run_status(d, "a") == "paused", RUN_TIMEOUT_S, "the run did not pause")
                assert box.is_displayed() and "retrieve" in box.text and "do retrieve" in box.text
                args = box.find_element(By.CSS_SELECTOR, '[data-role="pending-args"]')
                assert json.loads(args.get_attribute("value")) == {"query": "knuckle coupler patent"}
                args.clear()
                args.send_keys('{"query": ""}')
                box.find_element(By.CSS_SELECTOR, 'button[data-decision="edit"]').click()
                error = box.find_element(By.CSS_SELECTOR, '[data-role="approval-error"]')
                wait(browser, lambda d: error.is_displayed(), message="a bad edit was not reported")
                assert "422" in error.text and "non-empty query" in error.text and run_status(browser, "a") == "paused"
                steps = []
                while run_status(browser, "a") == "paused":
                    step = box.get_attribute("data-step")
                    steps.append(box.find_element(By.CSS_SELECTOR, '[data-role="pending-action"]').text)
                    box.find_element(By.CSS_SELECTOR, 'button[data-decision="approve"]').click()
                    wait(
                        browser,
                        lambda d: (
                            run_status(d, "a") in FINAL
                            or (run_status(d, "a") == "paused" and box.get_attribute("data-step") != step)  # noqa: B023
                        ),
                        RUN_TIMEOUT_S,
                        "no reply to Approve",
                    )
                assert steps == ["retrieve", "rerank", "grade", "answer"]
                assert run_status(browser, "a") == "done" and not box.is_displayed()
                assert "Janney" in browser.find_element(By.ID, "answer").text
                decisions = browser.find_elements(By.CSS_SELECTOR, '#run-a [data-role="decisions"] li')
                assert len(decisions) == 4 and all("human: approve" in d.text for d in decisions)
                assert node_states(browser, "a").get("approve") == "done"
                assert js_errors(browser) == []
        finally:
            llm.close()
