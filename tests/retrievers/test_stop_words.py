"""BM25's English stop words are scikit-learn's list (copied into package/stop_words.py), word for word, so
tokenisation, and with it every BM25 score, is what it was when they were read from scikit-learn."""

import hashlib

from switchyard.retrievers.bm25 import Tokenizer
from switchyard.stop_words import ENGLISH_STOP_WORDS

# len and sha256 of "\n".join(sorted(sklearn.feature_extraction.text.ENGLISH_STOP_WORDS)), scikit-learn 1.9.1
SKLEARN_COUNT = 318
SKLEARN_SHA256 = "40e0a284c5b9a220efffd18d4d739fbd3270091d6ce2c75b6effe289d3be5487"


def test_the_list_is_scikit_learns():
    assert len(ENGLISH_STOP_WORDS) == SKLEARN_COUNT
    assert hashlib.sha256("\n".join(sorted(ENGLISH_STOP_WORDS)).encode()).hexdigest() == SKLEARN_SHA256


def test_the_tokenizer_drops_them():
    assert Tokenizer(stem=False)("Who built the first engine of all?") == ["built", "engine"]
    assert Tokenizer(stem=False, remove_stop_words=False)("Who built it?") == ["who", "built", "it"]
