#!/usr/bin/env python3
"""Makes the Hugging Face test fixtures of `fixtures/hf/`: small checkpoints,
tokenizers and reference outputs that let Tessera's Rust tests check its Hugging Face checkpoint
loader and byte-level BPE tokenizer against `transformers` / `tokenizers` without Python at test
time.

Usage: python3 xtask/peers/make_hf_fixtures.py [--out fixtures/hf]
       (needs `pip install torch transformers tokenizers safetensors numpy` and Debian's
       `fortunes` package, /usr/share/games/fortunes)

What it makes under OUT:
  tokenizer/tokenizer.json      byte-level BPE (vocab 512, specials <|endoftext|> = 0 and
                                <|begin_of_text|> = 1) trained with `tokenizers` on the corpus
  tokenizer/corpus_ids.json     the corpus encoded with it: counts, sha256 of the ids as
                                little-endian u32, the first 300 ids, tokens per file, and a few
                                sample strings with their ids and decodings
  gpt2-tiny/                    GPT2LMHeadModel (2 layers, width 32) saved with save_pretrained
                                (safetensors) plus its tokenizer (PreTrainedTokenizerFast),
                                reference.safetensors and finetune.json
  gpt2-tiny-sharded/            the same weights saved in several shards with
                                model.safetensors.index.json
  llama-tiny/                   LlamaForCausalLM (2 layers, width 32, grouped-query attention
                                4 heads / 2 key-value heads, untied head), a tokenizer whose
                                post-processor adds <|begin_of_text|>, reference.safetensors and
                                finetune.json
  llama3-tiny/                  Llama with tied embeddings, rope_theta 500000 and llama3 RoPE
                                scaling, weights saved in bfloat16; its references are computed
                                in float32 from the saved bfloat16 weights

The corpus is every regular UTF-8 file under /usr/share/games/fortunes, exactly as Tessera's
`TextCorpus::load` (nn/src/data/text_corpus.rs) reads it: see `read_corpus`.

reference.safetensors (all float32 on the CPU, model in eval mode, loaded back from the saved
folder in float32):
  input_ids_L, logits_L         L in 1, 5, 37, 100: seeded random ids [1, L] and logits [1, L, 512]
  greedy_prompt                 [1, 8]: "The meaning of life is" encoded by the folder's tokenizer
                                (with BOS for the Llama models), cut or filled with the corpus's
                                first ids to 8 tokens
  greedy_new_tokens             [1, 64]: the 64 tokens plain greedy decoding appends (argmax at
                                each step, no end-of-sequence stop, no token suppressed); made by
                                `generate` and checked against a step-by-step argmax loop
  batch_input_ids, batch_logits [2, 16] and [2, 16, 512]
  greedy_min_margin             float32 [1]: the smallest gap between the best and the
                                second-best logit along the greedy path, so a test knows how
                                much numerical slack it has

finetune.json (gpt2-tiny, llama-tiny): 20 AdamW steps on corpus windows from the float32 model
loaded back from the folder; see `finetune`.

Weights: transformers' own initialisation (`_init_weights`: normal weights, zero biases, unit
norm weights) with initializer_range 0.2 (INIT_STD) instead of the usual 0.02. At 0.02 the
logits are nearly flat (std about 0.1): greedy decoding of the tied-embedding models repeats one
token 64 times and the untied Llama's top-two gap falls to 1e-4, a weak and fragile test; at 0.2
the logits have std about 1, the greedy outputs vary and the smallest gap is a few 1e-3. The
usual initialisation also leaves every bias at 0 and every LayerNorm / RMSNorm weight at 1, so a
loader that dropped or swapped them would still match; this script therefore adds seeded noise
to them (biases N(0, 0.02), norm weights 1 + N(0, 0.1)); see `perturb_constant_parameters`.

Deterministic: fixed seeds everywhere, one torch thread, torch.use_deterministic_algorithms,
tokenizers' parallelism off; the tokenizer is trained twice and the two results compared. Running
it twice gives identical files except that config.json / generation_config.json /
tokenizer_config.json may name the transformers version. Everything stays small (about 2.5 MB in
all) because the fixtures are committed.
"""

import argparse
import hashlib
import json
import os
import shutil
import stat
import struct
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORTUNES_DIR = "/usr/share/games/fortunes"

VOCAB = 512
INIT_STD = 0.2  # see the docstring: 0.02 gives near-flat logits and degenerate greedy outputs
EOT = "<|endoftext|>"
BOT = "<|begin_of_text|>"
SPECIALS = [EOT, BOT]
PROMPT_LENGTHS = [1, 5, 37, 100]
GREEDY_PROMPT = "The meaning of life is"
GREEDY_PROMPT_LEN = 8
GREEDY_NEW = 64
SAMPLES = [
    "Hello, world!",
    "  two  spaces\n\nand newlines\t",
    "ünïcödé — emoji 🦀",
    "<|endoftext|>between<|endoftext|>",
    "",
    "<|begin_of_text|>The meaning of life is",
    "It's 1984: don't PANIC!!",
]
FT = dict(batch=4, context=32, stride=7919, lr=1e-3, betas=[0.9, 0.999], eps=1e-8,
          weight_decay=0.0, steps=20)


def read_corpus(path=FORTUNES_DIR):
    """The corpus as Tessera's `TextCorpus::load` reads it: every regular file under `path`
    (`path` itself when it is a file), depth first, each folder's entries in name order (byte
    order of the names, as Rust sorts `PathBuf`s of one folder), symbolic links skipped (never
    followed), files whose bytes are not valid UTF-8 skipped (the fortunes' `.dat` indexes),
    the rest concatenated as they are (no separator).

    Returns (text, files, skipped): `files` lists (name relative to `path`, text) in order,
    `skipped` the relative names of the non-UTF-8 files."""
    found = []

    def collect(p):
        mode = os.lstat(p).st_mode
        if stat.S_ISREG(mode):
            found.append(p)
        elif stat.S_ISDIR(mode):
            for name in sorted(os.listdir(p), key=os.fsencode):
                collect(os.path.join(p, name))

    collect(path)
    files, skipped = [], []
    for p in found:
        rel = os.path.relpath(p, path) if p != path else os.path.basename(p)
        with open(p, "rb") as f:
            data = f.read()
        try:
            files.append((rel, data.decode("utf-8", errors="strict")))
        except UnicodeDecodeError:
            skipped.append(rel)
    text = "".join(t for _, t in files)
    if not text:
        sys.exit(f"no UTF-8 text under {path} (apt-get install fortunes)")
    return text, files, skipped


def setup_determinism():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    np.random.seed(0)
    transformers.logging.set_verbosity_error()


def generated_by():
    return {"script": "xtask/peers/make_hf_fixtures.py", "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


# --- tokenizer -------------------------------------------------------------------------------

def train_tokenizer(text):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text], trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def llama_tokenizer(tok):
    """The same BPE with a post-processor that puts <|begin_of_text|> first."""
    lt = Tokenizer.from_str(tok.to_str())
    bos = lt.token_to_id(BOT)
    lt.post_processor = processors.TemplateProcessing(
        single=f"{BOT} $A", pair=f"{BOT} $A {BOT} $B", special_tokens=[(BOT, bos)])
    return lt


def u32_sha256(ids):
    return hashlib.sha256(struct.pack(f"<{len(ids)}I", *ids)).hexdigest()


def make_tokenizer_fixtures(out, text, files, tok, ltok):
    d = os.path.join(out, "tokenizer")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids
    samples = []
    for t in SAMPLES:
        e = tok.encode(t).ids
        samples.append({
            "text": t,
            "ids": e,
            "decoded": tok.decode(e),
            "decoded_keep_special": tok.decode(e, skip_special_tokens=False),
            "tokens": tok.encode(t).tokens,
            "ids_with_bos_template": ltok.encode(t).ids,
        })
    obj = {
        "about": "Tokenizer fixture: the corpus (every regular UTF-8 file under "
                 f"{FORTUNES_DIR}, name order, symlinks skipped, concatenated) encoded by "
                 "tokenizer.json with encode(text, add_special_tokens=False). sha256_u32_le is the "
                 "sha256 of all ids as little-endian u32. per_file_tokens encodes each file's text "
                 "alone. samples: ids = encode(text) (the ByteLevel post-processor adds nothing; "
                 "special tokens in the text are matched), decoded = decode(ids) with tokenizers' "
                 "default skip_special_tokens=True, decoded_keep_special with False, "
                 "ids_with_bos_template = the llama-tiny tokenizer (TemplateProcessing adding "
                 "<|begin_of_text|>).",
        "generated_by": generated_by(),
        "corpus_dir": FORTUNES_DIR,
        "special_tokens": {s: tok.token_to_id(s) for s in SPECIALS},
        "vocab_size": tok.get_vocab_size(),
        "num_files": len(files),
        "num_bytes": len(text.encode("utf-8")),
        "num_chars": len(text),
        "num_tokens": len(ids),
        "sha256_u32_le": u32_sha256(ids),
        "first_ids": ids[:300],
        "per_file_tokens": [[name, len(tok.encode(t, add_special_tokens=False).ids)]
                            for name, t in files],
        "samples": samples,
    }
    write_json(os.path.join(d, "corpus_ids.json"), obj)
    return ids


# --- models ----------------------------------------------------------------------------------

def perturb_constant_parameters(model, seed):
    """Adds seeded noise to parameters the default init leaves constant (biases at 0, norm
    weights at 1), so that a loader mixing them up fails. Returns the names it changed."""
    g = torch.Generator().manual_seed(seed)
    changed = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().flatten()
            if not bool((flat == flat[0]).all()):
                continue
            v = float(flat[0])
            if v == 0.0:
                p.add_(torch.randn(p.shape, generator=g) * 0.02)
            elif v == 1.0:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                raise RuntimeError(f"{name} is constant {v}")
            changed.append(name)
    return changed


def check_weights(model, what):
    with torch.no_grad():
        for name, p in model.named_parameters():
            f = p.detach().float()
            if not torch.isfinite(f).all():
                raise RuntimeError(f"{what}: {name} is not finite")
            if f.numel() > 1 and float(f.std()) == 0.0:
                raise RuntimeError(f"{what}: {name} is constant after init")
    stds = {n: round(float(p.detach().float().std()), 4) for n, p in model.named_parameters()}
    print(f"{what}: parameter std: {json.dumps(stds)}")


def hf_tokenizer(tok, bos, eos):
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tok.to_str()),
                                   bos_token=bos, eos_token=eos)


def save_model(model, d, tok, bos, eos, **kw):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model.save_pretrained(d, safe_serialization=True, **kw)
    hf_tokenizer(tok, bos, eos).save_pretrained(d)
    print(f"--- {d}/config.json")
    with open(os.path.join(d, "config.json")) as f:
        print(f.read())


def load_f32(d):
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    model.eval()
    return model


def greedy_loop(model, prompt, n):
    """Plain greedy decoding, recomputing the whole sequence each step; returns the new tokens
    and the smallest top-1 / top-2 logit gap along the way."""
    ids = prompt.clone()
    margin = float("inf")
    with torch.no_grad():
        for _ in range(n):
            last = model(ids).logits[0, -1]
            top = torch.topk(last, 2).values
            margin = min(margin, float(top[0] - top[1]))
            nxt = int(torch.argmax(last))
            ids = torch.cat([ids, torch.tensor([[nxt]], dtype=ids.dtype)], dim=1)
    return ids[:, prompt.shape[1]:], margin


def make_reference(d, tok_for_prompt, corpus_ids, eos_id):
    model = load_f32(d)
    tensors = {}
    with torch.no_grad():
        for L in PROMPT_LENGTHS:
            rng = np.random.default_rng(1000 + L)
            x = torch.from_numpy(rng.integers(0, VOCAB, size=(1, L), dtype=np.int64))
            tensors[f"input_ids_{L}"] = x
            tensors[f"logits_{L}"] = model(x).logits.float().contiguous()
        rng = np.random.default_rng(2016)
        xb = torch.from_numpy(rng.integers(0, VOCAB, size=(2, 16), dtype=np.int64))
        assert not torch.equal(xb[0], xb[1])
        tensors["batch_input_ids"] = xb
        tensors["batch_logits"] = model(xb).logits.float().contiguous()
        # Batched rows must equal each row alone (no padding anywhere).
        for r in range(2):
            alone = model(xb[r:r + 1]).logits
            assert torch.allclose(alone, tensors["batch_logits"][r:r + 1], atol=1e-5), "batch row"

    enc = tok_for_prompt.encode(GREEDY_PROMPT).ids[:GREEDY_PROMPT_LEN]
    enc = enc + corpus_ids[:GREEDY_PROMPT_LEN - len(enc)]
    prompt = torch.tensor([enc], dtype=torch.int64)
    # `generate` stops at the end-of-sequence token unless it is unset; min_new_tokens would
    # instead suppress it (set its logit to -inf), which is not plain greedy. So: no eos at all,
    # and the result is checked against a step-by-step argmax loop.
    gen = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                         max_new_tokens=GREEDY_NEW, min_new_tokens=None, eos_token_id=None,
                         pad_token_id=eos_id, num_beams=1, temperature=None, top_p=None,
                         top_k=None, use_cache=True)
    new = gen[:, prompt.shape[1]:]
    if new.shape != (1, GREEDY_NEW):
        raise RuntimeError(f"{d}: generate gave {new.shape[1]} new tokens, not {GREEDY_NEW}")
    loop, margin = greedy_loop(model, prompt, GREEDY_NEW)
    if not torch.equal(new, loop):
        raise RuntimeError(f"{d}: generate and the argmax loop disagree:\n{new}\n{loop}")
    tensors["greedy_prompt"] = prompt
    tensors["greedy_new_tokens"] = new.contiguous()
    tensors["greedy_min_margin"] = torch.tensor([margin], dtype=torch.float32)
    # One metadata key only: safetensors writes the metadata map in hash order, so several keys
    # would make the file differ from run to run.
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())},
              os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
    print(f"{d}: greedy prompt {enc}, new {new[0].tolist()}, min margin {margin:.5f}, "
          f"eos in output: {eos_id in new[0].tolist()}")
    return margin


def finetune(d, ids, note):
    """AdamW fine-tuning reference: loss = mean cross-entropy of logits[b, t] against
    ids[off + t + 1] over all B*T positions, windows off = ((s*B + i) * stride) % (len - T - 1)."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    model.train()
    B, T, stride, steps = FT["batch"], FT["context"], FT["stride"], FT["steps"]
    ids_t = torch.tensor(ids, dtype=torch.int64)
    n = len(ids) - T - 1

    def batch(s):
        offs = [((s * B + i) * stride) % n for i in range(B)]
        x = torch.stack([ids_t[o:o + T] for o in offs])
        y = torch.stack([ids_t[o + 1:o + T + 1] for o in offs])
        return offs, x, y

    def loss_of(x, y):
        logits = model(x).logits
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 y.reshape(-1))

    opt = torch.optim.AdamW(model.parameters(), lr=FT["lr"], betas=tuple(FT["betas"]),
                            eps=FT["eps"], weight_decay=FT["weight_decay"], foreach=False,
                            fused=False)
    losses, offsets = [], []
    for s in range(steps):
        offs, x, y = batch(s)
        offsets.append(offs)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        losses.append(float(loss.item()))
        loss.backward()
        opt.step()
    with torch.no_grad():
        _, x, y = batch(0)
        final = float(loss_of(x, y).item())
    n_params = sum(p.numel() for p in model.parameters())
    obj = dict(FT)
    obj.update({
        "about": "Fine-tuning reference made by xtask/peers/make_hf_fixtures.py from this "
                 "folder's weights loaded in float32 (train mode, every dropout 0). ids = the "
                 "corpus (tokenizer/corpus_ids.json) encoded with add_special_tokens=False (no "
                 "BOS). Step s, row i: off = ((s*batch + i) * stride) % (len(ids) - context - 1), "
                 "x = ids[off:off+context], y = ids[off+1:off+context+1]. loss = mean "
                 "cross-entropy of the logits against y over all batch*context positions (no "
                 "shift inside the model). torch.optim.AdamW over model.parameters() (each "
                 "parameter once), no clipping, no schedule, single-tensor implementation. "
                 "losses[s] = the loss of step s's batch before its update; final_loss = the loss "
                 "of step 0's batch after all updates.",
        "note": note,
        "num_ids": len(ids),
        "num_parameters": n_params,
        "losses": losses,
        "final_loss": final,
        "offsets_step0": offsets[0],
        "offsets": offsets,
        "generated_by": generated_by(),
    })
    write_json(os.path.join(d, "finetune.json"), obj)
    print(f"{d}: finetune losses {losses[0]:.4f} -> {losses[-1]:.4f}, final {final:.4f}")


def build_gpt2(tok):
    eos = tok.token_to_id(EOT)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=32, n_layer=2, n_head=4,
                     bos_token_id=eos, eos_token_id=eos, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=INIT_STD)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    changed = perturb_constant_parameters(model, 100)
    check_weights(model, "gpt2-tiny")
    model.eval()
    return model, changed


def llama_config(tok, **kw):
    base = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=88, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                bos_token_id=tok.token_to_id(BOT), eos_token_id=tok.token_to_id(EOT),
                attention_bias=False, mlp_bias=False, hidden_act="silu", attention_dropout=0.0,
                initializer_range=INIT_STD)
    base.update(kw)
    return LlamaConfig(**base)


def build_llama(tok, seed, name, **kw):
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(tok, **kw))
    changed = perturb_constant_parameters(model, 100 + seed)
    check_weights(model, name)
    model.eval()
    return model, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="fixtures/hf",
                        help="output folder (relative paths are taken from the repository root)")
    parser.add_argument("--corpus", default=FORTUNES_DIR)
    a = parser.parse_args()
    out = a.out if os.path.isabs(a.out) else os.path.join(ROOT, a.out)
    setup_determinism()
    print(json.dumps(generated_by()))

    text, files, skipped = read_corpus(a.corpus)
    print(f"corpus: {len(files)} files, {len(text.encode('utf-8'))} bytes, "
          f"{len(skipped)} skipped as not UTF-8")
    tok = train_tokenizer(text)
    if train_tokenizer(text).to_str() != tok.to_str():
        sys.exit("training the tokenizer twice gave two different tokenizers")
    ltok = llama_tokenizer(tok)
    os.makedirs(out, exist_ok=True)
    corpus_ids = make_tokenizer_fixtures(out, text, files, tok, ltok)
    eos = tok.token_to_id(EOT)
    print(f"corpus tokens: {len(corpus_ids)}; {EOT} = {eos}, {BOT} = {tok.token_to_id(BOT)}")

    # GPT-2: plain and sharded.
    d = os.path.join(out, "gpt2-tiny")
    model, changed = build_gpt2(tok)
    print(f"gpt2-tiny: perturbed {changed}")
    save_model(model, d, tok, EOT, EOT)
    ds = os.path.join(out, "gpt2-tiny-sharded")
    save_model(model, ds, tok, EOT, EOT, max_shard_size="60KB")
    shards = [f for f in os.listdir(ds) if f.endswith(".safetensors")]
    if len(shards) < 2 or not os.path.exists(os.path.join(ds, "model.safetensors.index.json")):
        sys.exit(f"gpt2-tiny-sharded: expected several shards and an index, got {shards}")
    make_reference(d, tok, corpus_ids, eos)
    finetune(d, corpus_ids, "GPT-2's lm_head.weight is tied to transformer.wte.weight: in torch "
             "they are one parameter, updated once per step with the sum of both gradients (the "
             "checkpoint stores only transformer.wte.weight).")

    # Llama.
    d = os.path.join(out, "llama-tiny")
    model, changed = build_llama(tok, 1, "llama-tiny")
    print(f"llama-tiny: perturbed {changed}")
    save_model(model, d, ltok, BOT, EOT)
    make_reference(d, ltok, corpus_ids, eos)
    finetune(d, corpus_ids, "Llama's lm_head.weight is its own parameter here "
             "(tie_word_embeddings false).")

    # Llama 3 style: tied, rope_theta 500000, llama3 RoPE scaling, bfloat16 weights.
    d = os.path.join(out, "llama3-tiny")
    model, changed = build_llama(
        tok, 2, "llama3-tiny", tie_word_embeddings=True, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 256})
    print(f"llama3-tiny: perturbed {changed}")
    model = model.to(torch.bfloat16)
    save_model(model, d, ltok, BOT, EOT)
    make_reference(d, ltok, corpus_ids, eos)

    # The sharded copy must hold the same tensors as the single file.
    from safetensors.numpy import load_file as np_load
    one = np_load(os.path.join(out, "gpt2-tiny", "model.safetensors"))
    many = {}
    for f in sorted(os.listdir(ds)):
        if f.endswith(".safetensors") and f != "reference.safetensors":
            many.update(np_load(os.path.join(ds, f)))
    assert one.keys() == many.keys() and all(np.array_equal(one[k], many[k]) for k in one)
    print("done:", out)


if __name__ == "__main__":
    main()
