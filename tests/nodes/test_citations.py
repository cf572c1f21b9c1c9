from switchyard.nodes.citations import verify_citations
from switchyard.retrievers.documents import Passage
from switchyard.text import split_sentences

PASSAGES = [
    Passage(
        chunk_id="gauge-0",
        doc_id="gauge",
        title="Track gauge",
        source="/g.txt",
        page=None,
        text="Standard gauge is 1,435 mm and is used by about 55 percent of the world's lines.",
    ),
    Passage(
        chunk_id="coupler-0",
        doc_id="coupler",
        title="Couplers",
        source="/c.html",
        page=2,
        text="The Janney coupler was patented by Eli Janney in 1873.",
    ),
]


class TestVerifyCitations:
    def test_correct_citation_kept_and_renumbered(self, embedder):
        text, cites, stats = verify_citations("Eli Janney patented the coupler in 1873 [2].", PASSAGES, embedder, 0.55)
        assert text == "Eli Janney patented the coupler in 1873 [1]."
        assert [c.doc_id for c in cites] == ["coupler"] and cites[0].page == 2
        assert stats["kept"] == 1 and stats["corrected"] == 0

    def test_wrong_citation_is_corrected(self, embedder):
        text, cites, stats = verify_citations("Standard gauge is 1,435 mm [2].", PASSAGES, embedder, 0.55)
        assert text == "Standard gauge is 1,435 mm [1]." and cites[0].doc_id == "gauge"
        assert stats["corrected"] == 1 and stats["dropped"] == 1

    def test_unsupported_sentence_loses_its_citation(self, embedder):
        text, cites, stats = verify_citations("Bananas are yellow fruit [1].", PASSAGES, embedder, 0.55)
        assert "[" not in text and cites == [] and stats["unsupported"] == 1

    def test_uncited_supported_sentence_gains_one_and_out_of_range_is_ignored(self, embedder):
        text, cites, _ = verify_citations(
            "Eli Janney patented the coupler in 1873 [7]. Standard gauge is 1,435 mm.", PASSAGES, embedder, 0.55
        )
        assert text == "Eli Janney patented the coupler in 1873 [1]. Standard gauge is 1,435 mm [2]."
        assert [c.n for c in cites] == [1, 2]

    def test_invented_fact_on_the_right_topic_is_not_supported(self, embedder):
        text, cites, stats = verify_citations(
            "Eli Janney invented the steam locomotive in 1873 [2].", PASSAGES, embedder, 0.55
        )
        assert cites == [] and stats["unsupported"] == 1

    def test_split_sentences(self):
        assert split_sentences("One [1]. Two! 3 more? ") == ["One [1].", "Two!", "3 more?"]


def test_drop_unsupported_removes_invented_sentences(embedder):
    text, cites, stats = verify_citations(
        "Eli Janney patented the coupler in 1873 [2]. He also flew to the moon [1].",
        PASSAGES,
        embedder,
        0.55,
        drop_unsupported=True,
    )
    assert text == "Eli Janney patented the coupler in 1873 [1]." and stats["removed"] == 1
