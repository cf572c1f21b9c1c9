"""Generated question sets (evaluation/generate.py, evaluation/review.py, `cli.py eval generate|review`): each
check proven to reject, stratified seeded sampling, two-hop pairs, provenance as gold evidence, resume after an
interrupted run, review decisions kept and applied, and the set scored by `cli.py eval`. Replies are scripted
(tests/scripted_backend.py) or recorded into a reply cache and replayed through the CLI: no model is needed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from switchyard.cli import main
from switchyard.configs.loader import load_config
from switchyard.errors import DatasetError, UsageError
from switchyard.evaluation.datasets import load_dataset
from switchyard.evaluation.generate import (
    GeneratedReply,
    Settings,
    SourcePassage,
    answer_candidates,
    check_item,
    copy_ratio,
    generate_set,
    locate_sentence,
    passages_from_paths,
    pick_answer,
    planned_attempts,
    read_tried,
    sample_pairs,
    sample_passages,
)
from switchyard.evaluation.manifest import _dataset_entry
from switchyard.evaluation.review import read_decisions, review, reviewed_items
from switchyard.llm.cache import CachingBackend, ReplyStore
from switchyard.llm.client import LLM
from switchyard.llm.factory import llm_identity
from switchyard.retrievers.chunking import Chunker
from tests.scripted_backend import ScriptedBackend

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "generate" / "corpus"
VIADUCT = (
    "The Harwick Viaduct carries the valley line across the River Lune on twenty-two brick arches. It was designed "
    "by the engineer Mary Calder and opened to traffic in 1864."
)


def reply(question, answer, sentence):
    return GeneratedReply(question=question, answer=answer, supporting_sentence=sentence)


SETTINGS = Settings(size=1)


# -- the checks ---------------------------------------------------------------------------------------------------
class TestChecks:
    def test_a_supported_own_words_question_is_kept_with_its_sentence_span(self):
        r = reply(
            "Who designed the bridge over the Lune?", "Mary Calder", "It was designed by the engineer Mary Calder"
        )
        reason, span = check_item(r, VIADUCT, VIADUCT, SETTINGS)
        assert reason == "" and VIADUCT[slice(*span)].startswith("It was designed by the engineer Mary Calder")

    def test_an_answer_not_in_the_passage_is_unsupported(self):
        r = reply("When did the Harwick Viaduct open?", "1866", "It opened to traffic in 1866.")
        assert check_item(r, VIADUCT, VIADUCT, SETTINGS)[0] == "unsupported"

    def test_a_sentence_that_is_not_the_passages_is_unsupported_even_with_the_answer_in_the_passage(self):
        r = reply("When did the Harwick Viaduct open?", "1864", "The viaduct was finished by the army in 1864.")
        assert check_item(r, VIADUCT, VIADUCT, SETTINGS)[0] == "unsupported"

    def test_a_sentence_without_the_answer_is_unsupported(self):
        r = reply(
            "When did the viaduct open?", "1864", "The Harwick Viaduct carries the valley line across the River Lune"
        )
        assert check_item(r, VIADUCT, VIADUCT, SETTINGS)[0] == "unsupported"

    def test_a_question_copying_the_passage_is_rejected(self):
        r = reply(
            "The Harwick Viaduct carries the valley line across the River Lune on how many brick arches?",
            "twenty-two",
            "The Harwick Viaduct carries the valley line across the River Lune on twenty-two brick arches.",
        )
        assert copy_ratio(r.question, VIADUCT) > 0.5
        assert check_item(r, VIADUCT, VIADUCT, SETTINGS)[0] == "copied"
        assert check_item(r, VIADUCT, VIADUCT, Settings(max_copy=1.0))[0] == ""  # the cap is the setting

    def test_long_answers_and_answers_given_away_are_rejected(self):
        long = reply("Who designed it?", "the engineer Mary Calder who was born in Kendal", "It was designed by")
        given = reply(
            "Did Mary Calder design the Harwick Viaduct?", "Mary Calder", "designed by the engineer Mary Calder"
        )
        assert check_item(long, VIADUCT, VIADUCT, Settings(max_answer_words=4))[0] == "answer_too_long"
        assert check_item(given, VIADUCT, VIADUCT, SETTINGS)[0] == "answer_in_question"
        sentence = reply(
            "When did the Harwick Viaduct open?", "the Harwick Viaduct opened in 1864", "opened to traffic in 1864"
        )
        assert check_item(sentence, VIADUCT, VIADUCT, SETTINGS)[0] == "answer_restates_question"

    def test_a_two_hop_question_naming_its_bridge_is_rejected(self):
        calder = "Mary Calder was a civil engineer born in Kendal in 1821."
        r = reply("Where was Mary Calder born?", "Kendal", calder)
        both = VIADUCT + "\n" + calder
        assert check_item(r, calder, both, SETTINGS, entity="Mary Calder")[0] == "bridge_named"
        ok = reply("Where was the designer of the Harwick Viaduct born?", "Kendal", calder)
        assert check_item(ok, calder, both, SETTINGS, entity="Mary Calder")[0] == ""

    def test_a_quote_of_two_sentences_one_misspelt_stands_for_the_one_holding_the_answer(self):
        article = (
            "# Rosendo Lillie\n\n## Attributes\nThe date of birth of Rosendo Lillie is 0304-03-09.\nHe is a potter."
        )
        quote = "The date of birth of Rosedo Lillie is 0304-03-09. The occupation of Rosedo Lillie is tailor."
        r = reply("When was Rosendo Lillie born?", "0304-03-09", quote)
        reason, span = check_item(r, article, article, SETTINGS)
        assert reason == "" and article[slice(*span)] == "The date of birth of Rosendo Lillie is 0304-03-09."

    def test_locate_sentence_exact_near_and_absent(self):
        assert locate_sentence("opened to traffic in 1864.", VIADUCT) == (VIADUCT.index("opened"), len(VIADUCT))
        near = locate_sentence("It was designed by the engineer Mary Calder and opened to traffic in 1864", VIADUCT)
        assert near is not None and VIADUCT[slice(*near)].startswith("It was designed")
        assert locate_sentence("Cats sleep most of the day.", VIADUCT) is None
        assert locate_sentence("", VIADUCT) is None


def test_a_question_with_no_word_of_the_passage_is_off_topic():
    r = reply("In which year did the Forth Bridge open?", "1864", "It was designed by the engineer Mary Calder")
    assert check_item(r, VIADUCT, VIADUCT, SETTINGS)[0] == "off_topic"


# -- answer-first: the answer picked from the passage -------------------------------------------------------------
class TestAnswerFirst:
    def test_candidates_are_dates_numbers_names_then_what_follows_is(self):
        sentence = "It was designed by the engineer Mary Calder and opened to traffic in 1864."
        assert answer_candidates(sentence, 8)[:2] == ["1864", "Mary Calder"]
        assert answer_candidates("The date of birth of Tim Anglin is 2015-07-31.", 8, exclude="Tim Anglin") == [
            "2015-07-31"
        ]
        assert answer_candidates("The occupation of Tim Anglin is pharmacologist.", 8, exclude="Tim Anglin") == [
            "pharmacologist"
        ]
        assert answer_candidates("The father of Tim Anglin is Carl Cash.", 8, exclude="Tim Anglin") == ["Carl Cash"]
        assert answer_candidates("Paris is a city that many people visit.", 8, exclude="Paris") == ["city"]

    def test_long_candidates_and_the_title_are_left_out(self):
        sentence = "Tim Anglin is a furniture designer who loves ant farming and the sea."
        assert answer_candidates(sentence, 2, exclude="Tim Anglin") == ["furniture designer"]
        assert answer_candidates(sentence, 1, exclude="Tim Anglin") == []
        tramway = "The Ellery Mountain Tramway climbs from Port Ellery to the summit."
        assert answer_candidates(tramway, 8, exclude="Ellery Tramway") == ["Port Ellery"]  # the subject's longer name

    def test_the_pick_is_a_seeded_sentence_of_the_passage_and_an_answer_it_states(self):
        viaduct = passage("viaduct", 0, VIADUCT, "Harwick Viaduct")
        picks = {pick_answer(viaduct, Settings(size=1, answers="passage", seed=s)) for s in range(12)}
        assert len(picks) > 1
        for sentence, answer in picks:
            assert sentence in VIADUCT and answer in sentence and answer != "Harwick Viaduct"
        settings = Settings(size=1, answers="passage", seed=3)
        assert pick_answer(viaduct, settings) == pick_answer(viaduct, settings)
        assert pick_answer(passage("x", 0, "no answer here at all, only lower-case words.", "x"), settings) is None

    def test_two_hop_needs_answers_from_the_model(self):
        with pytest.raises(UsageError, match="two-hop items need answers from the model"):
            Settings(size=1, answers="passage", two_hop=0.5)
        with pytest.raises(UsageError, match="answers must be one of model, passage"):
            Settings(size=1, answers="gold")


# -- sampling -----------------------------------------------------------------------------------------------------
def passage(doc, i, text="x" * 300, title=""):
    return SourcePassage(doc, f"{doc}::{i}", f"{doc}.md", title or doc, text)


class TestSampling:
    POOL = [passage("a", i) for i in range(3)] + [passage("b", 0)] + [passage("c", i) for i in range(2)]

    def test_every_document_gives_one_before_any_gives_two(self):
        picked = sample_passages(self.POOL, 5, seed=0)
        assert len({p.doc_id for p in picked[:3]}) == 3
        assert len(picked) == 5 and len({p.chunk_id for p in picked}) == 5

    def test_seeded(self):
        ids = [p.chunk_id for p in sample_passages(self.POOL, 6, seed=3)]
        assert ids == [p.chunk_id for p in sample_passages(self.POOL, 6, seed=3)]
        assert any(ids != [p.chunk_id for p in sample_passages(self.POOL, 6, seed=s)] for s in range(4, 10))

    def test_short_passages_are_left_out(self):
        pool = [*self.POOL, passage("d", 0, text="short")]
        attempts = planned_attempts(pool, Settings(size=2, max_tries=6, min_chars=200))
        assert all(p.doc_id != "d" for a in attempts for p in a.passages)

    def test_pairs_share_a_name_across_documents_and_b_is_about_it(self):
        viaduct = passage("viaduct", 0, VIADUCT, "Harwick Viaduct")
        calder = passage("calder", 0, "Mary Calder was a civil engineer born in Kendal in 1821.", "Mary Calder")
        tunnel = passage("tunnel", 0, "The Tarrant Tunnel is 2,150 metres long.", "Tarrant Tunnel")
        assert sample_pairs([viaduct, calder, tunnel], 5, seed=0) == [(viaduct, calder, "Mary Calder")]
        assert sample_pairs([viaduct, calder, tunnel], 0, seed=0) == []

    def test_a_name_in_many_passages_pairs_a_bounded_sample_of_them(self):
        many = [passage(f"d{i}", 0, f"The Grand Union Canal passes mill {i}.") for i in range(500)]
        pairs = sample_pairs(many, 1000, seed=0)
        assert 0 < len(pairs) <= 32 and len({a.doc_id for a, _, _ in pairs}) == len(pairs)


# -- a whole run --------------------------------------------------------------------------------------------------
REPLIES = {
    "Harwick Viaduct": (
        "Who designed the bridge that takes the valley line over the River Lune?",
        "Mary Calder",
        "It was designed by the engineer Mary Calder and opened to traffic in 1864.",
    ),
    "Mary Calder": (  # a near-duplicate of the viaduct's question
        "Who designed the bridge taking the valley line over the River Lune?",
        "Mary Calder",
        "Mary Calder was a civil engineer born in Kendal in 1821.",
    ),
    "Ellery Tramway": (  # unsupported: 1903 is not in the passage
        "Since when has the Ellery Mountain Tramway run every summer?",
        "1903",
        "The tramway has run every summer since 1903.",
    ),
    "Tarrant Tunnel": (  # copied
        "The Tarrant Tunnel is how long and was bored through limestone between 1872 and 1876?",
        "2,150 metres",
        "The Tarrant Tunnel is 2,150 metres long and was bored through limestone between 1872 and 1876.",
    ),
}
TWO_HOP = ("In which town was the designer of the Harwick Viaduct born?", "Kendal", "born in Kendal in 1821")


def scripted(messages, schema):
    user = messages[-1]["content"] if messages[-1]["role"] == "user" else messages[1]["content"]
    if "Passage A" in user:
        q, a, s = TWO_HOP
    else:
        title = user.split("(", 1)[1].split(")", 1)[0]
        q, a, s = REPLIES[title]
    return json.dumps({"question": q, "answer": a, "supporting_sentence": s})


@pytest.fixture(scope="module")
def passages(embedder):
    return passages_from_paths([str(CORPUS)], Chunker(256, 32, embedder.tokenizer_file))


def run(passages, out, embedder, backend, **settings):
    settings = Settings(**{"size": 10, "max_tries": 10, "min_chars": 100, **settings})
    manifest = {"source": {"paths": [str(CORPUS)]}, "model": {"backend": "scripted", "model": "test"}}
    return generate_set(passages, out, LLM(backend, max_retries=0), embedder.run, settings, manifest, progress=False)


def test_a_run_keeps_what_passes_and_records_why_the_rest_was_rejected(passages, tmp_path, embedder):
    done = run(passages, tmp_path, embedder, ScriptedBackend(scripted))
    assert (done.tried, done.kept, done.asked) == (4, 1, 4)  # four passages, one try each
    assert done.reasons == {"kept": 1, "unsupported": 1, "copied": 1, "duplicate": 1}
    items = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert len(items) == 1 and items[0]["answers"] == ["Mary Calder"] and items[0]["type"] == "generated"
    [prov] = items[0]["provenance"]
    document = next(p for p in passages if p.chunk_id == prov["chunk_id"])
    assert items[0]["gold_doc_ids"] == [document.doc_id] and prov["source"].endswith(".md")
    full = (CORPUS / Path(prov["source"]).name).read_text()
    assert "Mary Calder" in prov["sentence"] and prov["sentence"] in full
    manifest = json.loads((tmp_path / "generation.json").read_text())
    assert manifest["tried"] == 4 and manifest["kept"] == 1 and manifest["yield"] == 0.25
    assert manifest["reasons"]["duplicate"] == 1 and manifest["usage"]["llm_calls"] == 4
    assert manifest["settings"]["seed"] == 0 and manifest["source"] == {"paths": [str(CORPUS)]}


def test_two_hop_items_pair_passages_sharing_a_name(passages, tmp_path, embedder):
    done = run(passages, tmp_path, embedder, ScriptedBackend(scripted), two_hop=0.5, max_tries=4)
    items = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    [two] = [i for i in items if i["type"] == "generated-two-hop"]
    assert two["entity"] == "Mary Calder" and two["answers"] == ["Kendal"]
    assert [p["source"].rsplit("/", 1)[-1] for p in two["provenance"]] == ["harwick-viaduct.md", "mary-calder.md"]
    assert len(two["gold_doc_ids"]) == 2 and "span" in two["provenance"][1] and "span" not in two["provenance"][0]
    assert done.tried == 4


def ask_only_the_question(messages, schema):
    """Answer-first replies: the question the sentence answers, or (for the tunnel) the prompt's own example."""
    user = messages[-1]["content"]
    assert set(schema["properties"]) == {"question"} and "\nAnswer: " in user
    if "(Tarrant Tunnel)" in user:
        return json.dumps({"question": "In which year did the Forth Bridge open?"})
    title = user.split("(", 1)[1].split(")", 1)[0]
    return json.dumps({"question": f"What does the text about the {title} say, in short?"})


def test_answer_first_asks_only_for_the_question_and_keeps_the_picked_answer(passages, tmp_path, embedder):
    backend = ScriptedBackend(ask_only_the_question)
    done = run(passages, tmp_path, embedder, backend, answers="passage", max_similar=0.99)
    assert done.reasons["off_topic"] == 1 and done.kept == 3 and len(backend.calls) == 4
    for line in read_tried(tmp_path):
        *shown, user = [m["content"] for m in backend.calls[line["n"]] if m["role"] == "user"]
        assert len(shown) == 3  # the worked examples, as earlier turns
        sentence, answer = user.rsplit("\nSentence: ", 1)[1].split("\nAnswer: ")
        assert line["reply"]["answer"] == answer and line["reply"]["supporting_sentence"] == sentence
        if line["reason"] == "kept":
            [prov] = line["item"]["provenance"]
            assert prov["sentence"] == sentence and line["item"]["answers"] == [answer]
    manifest = json.loads((tmp_path / "generation.json").read_text())
    assert list(manifest["settings"].items())[-1] == ("answers", "passage")


class Interrupting(ScriptedBackend):
    def __init__(self, after: int):
        super().__init__(scripted)
        self.after = after

    def chat(self, messages, **kw):
        if len(self.calls) >= self.after:
            raise KeyboardInterrupt
        return super().chat(messages, **kw)


def test_an_interrupted_run_resumes_where_it_stopped(passages, tmp_path, embedder):
    whole = run(passages, tmp_path / "whole", embedder, ScriptedBackend(scripted))
    with pytest.raises(KeyboardInterrupt):
        run(passages, tmp_path / "cut", embedder, Interrupting(after=2))
    assert len(read_tried(tmp_path / "cut")) == 2
    cut = json.loads((tmp_path / "cut" / "generation.json").read_text())  # written out when interrupted too
    kept_so_far = (tmp_path / "cut" / "questions.jsonl").read_text().splitlines()
    assert cut["tried"] == 2 and len(kept_so_far) == cut["kept"] == cut["reasons"].get("kept", 0)
    again = ScriptedBackend(scripted)
    resumed = run(passages, tmp_path / "cut", embedder, again)
    assert len(again.calls) == 2 and resumed.asked == 2  # only what was not tried
    assert (resumed.tried, resumed.kept, resumed.reasons) == (whole.tried, whole.kept, whole.reasons)
    assert (tmp_path / "cut" / "questions.jsonl").read_text() == (tmp_path / "whole" / "questions.jsonl").read_text()
    nothing = ScriptedBackend(scripted)
    assert run(passages, tmp_path / "cut", embedder, nothing).asked == 0 and not nothing.calls


def test_a_folder_refuses_other_settings(passages, tmp_path, embedder):
    run(passages, tmp_path, embedder, ScriptedBackend(scripted))
    with pytest.raises(UsageError, match="other settings \\(seed\\)"):
        run(passages, tmp_path, embedder, ScriptedBackend(scripted), seed=1)


# -- review and scoring -------------------------------------------------------------------------------------------
def write_set(folder: Path, n: int = 4) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    items = [
        {"id": f"gen-{i:04d}", "question": f"Question {i}?", "answers": [f"answer {i}"], "gold_doc_ids": ["d"],
         "type": "generated", "provenance": [{"doc_id": "d", "source": "d.md", "chunk_id": "d::0"}]}
        for i in range(n)
    ]  # fmt: skip
    (folder / "questions.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (folder / "generation.json").write_text(json.dumps({"source": {"paths": [str(CORPUS)]}}))


def keys(*typed):
    answers = iter(typed)
    return lambda prompt: next(answers)


def test_review_decisions_are_kept_resumed_and_applied(tmp_path):
    write_set(tmp_path)
    shown = []
    counts = review(tmp_path, keys("a", "x", "e", "What is question one?", "", "r", "q"), shown.append)
    assert counts == {"accept": 1, "edit": 1, "reject": 1, "unreviewed": 1}
    assert set(read_decisions(tmp_path)) == {"gen-0000", "gen-0001", "gen-0002"}
    assert any("Q: Question 0?" in line for line in shown)
    # a second session starts at the first item without a decision
    shown.clear()
    assert review(tmp_path, keys("a"), shown.append)["accept"] == 2
    assert any("gen-0003" in line for line in shown) and not any("gen-0000" in line for line in shown)

    items, counts = reviewed_items(tmp_path)
    assert [i["id"] for i in items] == ["gen-0000", "gen-0001", "gen-0003"]
    assert items[1]["question"] == "What is question one?" and items[1]["answers"] == ["answer 1"]
    assert items[1]["review"] == "edit"


def test_eval_scores_accepted_items_only_unless_asked(tmp_path):
    write_set(tmp_path)
    with pytest.raises(DatasetError, match="no item to score .*0 accepted.*4 not reviewed.*--unreviewed"):
        load_dataset(tmp_path)
    assert len(load_dataset(tmp_path, unreviewed=True).questions) == 4
    review(tmp_path, keys("r", "a", "q"), lambda line: None)
    data = load_dataset(tmp_path)
    assert [q.id for q in data.questions] == ["gen-0001"] and data.corpus == [CORPUS]
    assert [q.id for q in load_dataset(tmp_path, unreviewed=True).questions] == ["gen-0001", "gen-0002", "gen-0003"]


def test_a_sets_hash_in_a_run_manifest_covers_its_items_and_review_not_the_generators_records(tmp_path):
    """Rerunning `eval generate` (to resume, or under a new commit) rewrites generation.json and the reply cache but
    not what `eval SET` scores, so a run on the set still resumes; a review decision changes what is scored."""
    write_set(tmp_path)

    def sha():
        return _dataset_entry(tmp_path)["sha256"]

    first = sha()
    (tmp_path / "generation.json").write_text(json.dumps({"source": {"paths": [str(CORPUS)]}, "code": "other"}))
    (tmp_path / "llm-cache").mkdir()
    (tmp_path / "llm-cache" / "replies.jsonl").write_text("{}\n")
    (tmp_path / "tried.jsonl").write_text("{}\n")
    assert sha() == first
    review(tmp_path, keys("r", "q"), lambda line: None)
    assert sha() != first
    reviewed = sha()
    (tmp_path / "questions.jsonl").write_text((tmp_path / "questions.jsonl").read_text().replace("Question 3", "Q3"))
    assert sha() not in (first, reviewed)


def test_cli_generates_from_recorded_replies_and_eval_scores_the_set(tmp_path, embedder, capsys, monkeypatch):
    """The tutorial's commands: `eval generate` (replies recorded beforehand, replayed: no model), `eval review`
    (stdin), then `eval` on the set with the no-LLM pipeline."""
    cache = tmp_path / "replies"
    config = load_config(None, [f"llm.cache_dir={cache}"])
    recorder = CachingBackend(ScriptedBackend(scripted), ReplyStore(cache), llm_identity(config.llm),
                              default_seed=config.llm.seed)  # fmt: skip
    settings = Settings(size=10, max_tries=10, min_chars=100)
    passages = passages_from_paths([str(CORPUS)], Chunker(256, 32, embedder.tokenizer_file))
    generate_set(passages, tmp_path / "record", LLM(recorder, max_retries=0), embedder.run, settings, {}, False)

    out = tmp_path / "set"
    code = main(["eval", "generate", str(CORPUS), "--out", str(out), "--size", "10", "--min-chars", "100",
                 "--llm-cache", str(cache), "--replay", "--no-progress"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0 and "kept 1 of 4 tried (25%" in printed and "1 copied" in printed
    assert json.loads((out / "generation.json").read_text())["model"]["backend"] == "local"
    assert (out / "config.yaml").is_file()

    code = main(["eval", "generate", str(CORPUS), "--out", str(out), "--size", "10", "--seed", "2",
                 "--min-chars", "100", "--llm-cache", str(cache), "--replay", "--no-progress"])  # fmt: skip
    assert code == 2 and "other settings (seed)" in capsys.readouterr().err

    monkeypatch.setattr("sys.stdin", io.StringIO("a\n"))
    assert main(["eval", "review", str(out)]) == 0
    assert "1 accepted, 0 edited, 0 rejected, 0 not reviewed" in capsys.readouterr().out

    report = tmp_path / "report"
    code = main(["eval", str(out), "--configs", "no-llm", "--out", str(report), "--index-dir", str(tmp_path / "index"),
                 "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    [row] = [json.loads(line) for line in (report / "questions.jsonl").read_text().splitlines()]
    assert row["id"].startswith("gen-") and row["answers"] == ["Mary Calder"]
    assert row["gold_doc_ids"] and row["gold_recall"] == 1.0  # the passage it came from is found
    # the report says where the set came from and what of it was scored
    shown = (report / "report.md").read_text()
    assert "- question set: generated by local " in shown and "kept 1 of 4 tried; items: 1 accept" in shown
    manifest = json.loads((report / "manifest.json").read_text())
    assert manifest["dataset"]["generated"]["reasons"]["copied"] == 1
