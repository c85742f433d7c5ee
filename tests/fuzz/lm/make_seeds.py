#!/usr/bin/python3
"""make_seeds.py — write the small seed inputs of each fuzz target into seeds/TARGET/ from the
fixtures (tests/fixtures/tokenizer/*.json and cases.ndjson, tests/fixtures/hf/*). Tokenizers are
cut down to a few KB: the special tokens, the byte alphabet and the first merges, with ids
renumbered densely (as HF would assign them) and the non-special added tokens after them."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "fixtures")


def put(t, name, data):
    os.makedirs(os.path.join(HERE, "seeds", t), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    open(os.path.join(HERE, "seeds", t, name), "wb").write(data)


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def small_tokenizer(name, n_merges, sp=False):
    tok = json.load(open(os.path.join(FIX, "tokenizer", name + ".json"), encoding="utf-8"))
    m = tok["model"]
    vocab = m["vocab"]
    merges = m["merges"]
    pairs = [x.split(" ") if isinstance(x, str) else x for x in merges]
    # SentencePiece-style files (sp): also <unk>, <s>, <bos> ... and the <0xHH> byte tokens
    keep = {k for k in vocab if len(k) == 1 or k.startswith("<|") or (sp and k.startswith("<"))}
    kept = []
    for i, (a, b) in enumerate(pairs):
        if len(kept) == n_merges:
            break
        if a in keep and b in keep:
            keep.add(a + b)
            kept.append(merges[i])
    order = sorted(keep, key=lambda k: vocab[k])
    m["vocab"] = {k: i for i, k in enumerate(order)}
    m["merges"] = kept
    nxt = len(order)
    for a in tok["added_tokens"]:
        if a["content"] in m["vocab"]:
            a["id"] = m["vocab"][a["content"]]
        else:
            a["id"] = nxt
            nxt += 1
    return tok


cases = [json.loads(l) for l in open(os.path.join(FIX, "tokenizer", "cases.ndjson"), encoding="utf-8")]
texts = {}
for c in cases:
    texts.setdefault(c["tok"], []).append(c["text"])
for name, nm in (("gpt2", 24), ("llama3", 24), ("qwen2", 16)):
    tok = small_tokenizer(name, nm)
    j = dumps(tok)
    text = next(t for t in texts[name][1:] if len(t.encode()) < 300)
    put("tok", name, j.encode() + b"\0" + text.encode())
    put("tok", name + "-nul-only", j.encode() + b"\0")
    if name == "llama3":
        tok["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [], "special_tokens": {}}]}
        put("tok", "llama3-bos", dumps(tok).encode() + b"\0<|im_start|>sparse bench zz<|x")
    if name == "qwen2":
        put("tok", "qwen2-nfc-refused", j.encode() + b"\0cafe\u0301".decode("unicode_escape").encode())
picked = {}
for c in cases:
    k = {"gpt2": 0, "llama3": 1, "qwen2": 2}[c["tok"]]
    t = c["text"].encode()
    if 0 < len(t) < 2000 and picked.get(c["tok"], 0) < 4:
        picked[c["tok"]] = picked.get(c["tok"], 0) + 1
        put("toktext", "%s-%d" % (c["tok"], c["i"]), bytes([k]) + t)
sp_cases = [json.loads(l) for l in open(os.path.join(FIX, "tokenizer", "sp_cases.ndjson"), encoding="utf-8")]
sp_texts = {}
for c in sp_cases:
    sp_texts.setdefault(c["tok"], []).append(c["text"])
for name in ("llama2", "gemma", "sp_unk"):
    tok = small_tokenizer(name, 24, sp=True)
    text = next(t for t in sp_texts[name][151:] if len(t.encode()) < 300 and "<" in t)
    put("tok", name, dumps(tok).encode() + b"\0" + text.encode())
sp_picked = {}
for c in sp_cases:  # toktext's first byte: 3 llama2, 4 gemma, 5 llama2_ms (targets.h)
    k = {"llama2": 3, "gemma": 4, "llama2_ms": 5}.get(c["tok"])
    t = c["text"].encode()
    if k is not None and c["i"] >= 151 and 0 < len(t) < 2000 and sp_picked.get(k, 0) < 3:
        sp_picked[k] = sp_picked.get(k, 0) + 1
        put("toktext", "%s-%d" % (c["tok"], c["i"]), bytes([k]) + t)
put("toktext", "invalid-utf8", b"\0ab\xff\xc3(")
put("toktext", "specials", b"\1<|im_start|>user\n<|im_end|>zz<|sparse bench\r\n \n  x")

hf = os.path.join(FIX, "hf")
for d in sorted(os.listdir(hf)):
    p = os.path.join(hf, d, "config.json")
    if os.path.exists(p):
        put("hfconfig", d, dumps(json.load(open(p))))
cfg = json.load(open(os.path.join(hf, "llama_bf16", "config.json")))
cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 64}
put("hfconfig", "llama3-rope", dumps(cfg))

idx = json.load(open(os.path.join(hf, "llama_bias", "model.safetensors.index.json")))
items = list(idx["weight_map"].items())
idx["weight_map"] = dict(items[:6] + items[-6:])
put("hfindex", "llama_bias", dumps(idx))
put("hfindex", "one", '{"weight_map":{"a":"model.safetensors"}}')


def st(tensors, meta=None):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "small", st([("a", "F32", [2, 3], struct.pack("<6f", *range(6))),
                                ("b", "BF16", [4], b"\x80\x3f" * 4), ("c", "U8", [0], b""),
                                ("s", "I64", [], struct.pack("<q", -7))], {"cell_id": "x", "format": "pt"}))
put("safetensors", "types", st([(t, t, [2], b"\1" * (2 * sz)) for t, sz in
                                (("F64", 8), ("F16", 2), ("I8", 1), ("I16", 2), ("U16", 2), ("I32", 4),
                                 ("U32", 4), ("U64", 8), ("BOOL", 1))]))
# the real header of a fixture checkpoint, with the data cut to what its first tensors need
raw = open(os.path.join(hf, "qwen2_f16", "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
keep = [k for k in hdr if k != "__metadata__"][:5]
end = max(hdr[k]["data_offsets"][1] for k in keep)
h2 = {k: hdr[k] for k in keep}
if end <= 3000:
    put("safetensors", "qwen2_f16-head", st([(k, h2[k]["dtype"], h2[k]["shape"],
                                               raw[8 + n + h2[k]["data_offsets"][0]:8 + n + h2[k]["data_offsets"][1]])
                                              for k in keep]))
else:
    h2 = {k: {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]} for k in keep}
    put("safetensors", "qwen2_f16-names", st([(k, "U8", [0], b"") for k in keep]))

put("json", "object", '{"a":[1,-2.5e3,true,false,null],"b":{"c":"d\\u00e9\\ud83d\\ude00\\n"},"":0}')
put("json", "deep", "[" * 40 + "1" + "]" * 40)
put("json", "numbers", "[0,-0,1e400,-1e-400,12345678901234567890,0.1,1E+2]")
put("json", "strings", '["\\u0000","\\"\\\\\\/\\b\\f\\n\\r\\t","\u00e9\u4e2d","\\udc00x"]')
put("ndjson", "records", b"\0" + open(os.path.join(FIX, "tokenizer", "cases.ndjson"), "rb").read()[:1500].rsplit(b"\n", 1)[0] + b"\n")
put("ndjson", "crlf-blank", b"\3{\"kind\":\"a\",\"v\":1}\r\n\r\n  \n[1,2]\n\"x\"")
put("ndjson", "errors", b"\7{\"a\":1}\n{\"a\":1,\"a\":2}\n")
put("ndjson", "bom", b"\1\xef\xbb\xbf{}\n")
