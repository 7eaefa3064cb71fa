#!/usr/bin/env python3
"""tfm-convert of Hugging Face Marian models, Marian models and fairseq
checkpoints against transformers itself.

    convert_vs_transformers.py TFM_BIN DATA_DIR WORK_DIR

Builds small random MarianMTModel directories as OPUS-MT's look (two
SentencePiece models trained here with spm_train, a joint vocab.json whose
ids are not SentencePiece's, </s> = 0, <pad> last and the decoder's start),
in several variants of the architecture, saved as safetensors or as
pytorch_model.bin. For each, tfm-convert writes a tfm checkpoint, and:

  pieces     tfm-tok (source model) and tfm-tok --side target give exactly
             spm_encode's pieces of each side.
  log-probs  tfm-score -m's per-token log-probabilities of reference
             targets equal transformers' forward within 1e-5 (of the value,
             absolute below 1; every token of every sentence, eos included).
  greedy     tfm-decode --beam 1 gives generate(num_beams=1)'s tokens, line
             for line.
  beam 4     tfm-decode --beam 4 --alpha 0 gives generate(num_beams=4,
             length_penalty=0)'s best hypothesis, line for line, on the lines
             where it ends before the maximum length (at least half):
             there generate forces eos with a log-probability of 0, where
             tfm counts eos's own, so the two rank such hypotheses apart.
  ct2        CTranslate2's own converter (ct2-transformers-converter) of the
             same directory, greedy: the same tokens (a third opinion).
  text       the README's pipeline, tfm-tok | tfm-decode | tfm-tok -d, gives
             the target SentencePiece model's detokenization of those tokens.
  marian     the same weights written as a Marian .npz by Marian's parameter
             names (weights (in, out), its model.yml in special:model.yml,
             the vocabulary as a .yml without the <pad> transformers' port
             adds) convert to the same checkpoint, byte for byte.

fairseq: checkpoints laid out by fairseq's state-dict keys and options, with
a joined dictionary (fairseq's four specials, the pieces, madeupwords to a
multiple of 8), holding the weights of a transformers FSMT model (its port of
fairseq's WMT19 Transformer: fairseq's sinusoids from position 2, untied
output projection, ReLU or GELU), whose forward and generate are the
reference for the log-probabilities, greedy and beam-4 outputs.

Each model is trained for a few seconds to copy sequences of pieces (a
random one gives flat distributions, or outputs that run to the maximum
length), with a random bias on its logits.
Exits 1 on any difference, with the first lines that differ.
"""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import torch
from transformers import MarianConfig, MarianMTModel

LOG_PROB_TOL = 1e-5  # of max(1, |log p|)
SENTENCES = 24  # test sentences per variant
MAX_NEW = 60    # generate's max_new_tokens (eos included)
TRAIN_STEPS = 300
MODEL_SEEDS = 3  # seeds a variant's model may take (each trained TRAIN_STEPS, then twice as long)

# name, MarianConfig fields, file format
VARIANTS = [
    ("opus-mt", dict(activation_function="swish", scale_embedding=True), "safetensors"),
    ("gelu-unscaled", dict(activation_function="gelu", scale_embedding=False, encoder_layers=3,
                           decoder_layers=1), "bin"),
    ("relu-untied", dict(activation_function="relu", scale_embedding=True, tie_word_embeddings=False,
                         share_encoder_decoder_embeddings=False), "safetensors"),
]


def fail(msg):
    print(f"convert_vs_transformers: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(*args, stdin=None):
    p = subprocess.run([str(a) for a in args], input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(map(str, args))} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def lines(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def spm_pieces(model):
    return [line.split("\t")[0] for line in run("spm_export_vocab", f"--model={model}").splitlines()]


def make_tokenizers(work, data):
    """source.spm, target.spm (en, de) and an OPUS-MT vocab.json."""
    for side, lang, size in (("source", "en", 320), ("target", "de", 280)):
        text = os.path.join(work, f"train.{lang}")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(lines(os.path.join(data, f"train.{lang}.gz"), 3000)) + "\n")
        run("spm_train", f"--input={text}", f"--model_prefix={work}/{side}", f"--vocab_size={size}",
            "--character_coverage=1.0", "--minloglevel=2")
        os.rename(f"{work}/{side}.model", f"{work}/{side}.spm")
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in spm_pieces(f"{work}/source.spm") + spm_pieces(f"{work}/target.spm"):
        if piece not in vocab and piece != "<s>":
            vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def make_model(directory, work, vocab, fields, fmt, seed, steps=TRAIN_STEPS):
    """A MarianMTModel trained for a few hundred steps to copy sequences of
    20 pieces: not long enough to learn to copy, but its distributions are
    peaked and its outputs end, after a few tokens (an untrained one gives
    flat distributions, or outputs that run to the maximum)."""
    V = len(vocab)
    config = MarianConfig(**{**dict(vocab_size=V, decoder_vocab_size=V, d_model=32, encoder_layers=2,
                                    decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                    encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=1024,
                                    pad_token_id=V - 1, eos_token_id=0, decoder_start_token_id=V - 1,
                                    forced_eos_token_id=0, dropout=0.0), **fields})
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    with torch.no_grad():  # the logits' bias is a buffer: random, not learned
        model.final_logits_bias.copy_(0.1 * torch.randn_like(model.final_logits_bias))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        n = int(torch.randint(3, 13, (1,), generator=g))
        x = torch.randint(2, 22, (32, n), generator=g)  # a few pieces: learnt within the steps
        eos = torch.zeros(32, 1, dtype=torch.long)
        src, labels = torch.cat([x, eos], 1), torch.cat([x, eos], 1)
        loss = model(input_ids=src, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():  # as transformers' port of a Marian model: <pad>, the start, is zeros
        for e in {id(t): t for t in (model.model.shared, model.model.encoder.embed_tokens,
                                     model.model.decoder.embed_tokens) if t is not None}.values():
            e.weight[V - 1].zero_()
        model.final_logits_bias[0, V - 1] = 0
    model.save_pretrained(directory, safe_serialization=(fmt == "safetensors"))
    for side in ("source", "target"):
        with open(f"{work}/{side}.spm", "rb") as f, open(f"{directory}/{side}.spm", "wb") as g2:
            g2.write(f.read())
    with open(f"{directory}/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    return model


def log_prob_error(got, want):
    """The worst |tfm - reference| as a share of its tolerance (LOG_PROB_TOL)."""
    return max(abs(a - b) / (LOG_PROB_TOL * max(1.0, abs(b))) for a, b in zip(got, want))


def ids_of(pieces, vocab):
    return [vocab.get(p, vocab["<unk>"]) for p in pieces.split()]


def hf_log_probs(model, src, tgt):
    """Per-token log p of tgt + eos given src + eos (ids)."""
    start = model.config.decoder_start_token_id
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([src + [0]]),
                       decoder_input_ids=torch.tensor([[start] + tgt])).logits[0]
    lp = torch.log_softmax(logits.double(), dim=-1)
    return [float(lp[i, t]) for i, t in enumerate(tgt + [0])]


def hf_generate(model, src_ids, **kw):
    out = []
    with torch.no_grad():
        for src in src_ids:
            y = model.generate(torch.tensor([src + [0]]), max_new_tokens=MAX_NEW, do_sample=False, **kw)[0].tolist()
            y = y[1:]  # the start token
            out.append(y[:y.index(0)] if 0 in y else y)
    return out


def compare(name, what, ours, theirs):
    bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if len(ours) != len(theirs) or bad:
        i = bad[0] if bad else min(len(ours), len(theirs))
        fail(f"{name}: {what} differ on {len(bad)} of {len(theirs)} lines; line {i + 1}:\n"
             f"  tfm:          {ours[i] if i < len(ours) else '(none)'}\n"
             f"  transformers: {theirs[i] if i < len(theirs) else '(none)'}")


def training_schedule(seed):
    """The seeds and step counts a variant's model is trained with, in turn,
    until search can be compared on it (searchable_model, check_fairseq)."""
    for attempt in range(MODEL_SEEDS):
        for steps in (TRAIN_STEPS, 2 * TRAIN_STEPS):
            yield seed + 1000 * attempt, steps


def searchable_model(name, directory, work, vocab, fields, fmt, seed, src_file):
    """make_model from `seed`, trained longer or from the next seeds while
    more than half of its greedy outputs on the test's sources are empty
    (search cannot be compared on such a model); returns the model and
    those greedy outputs. The models are trained on
    each machine's PyTorch, whose kernels differ a little by CPU, and a
    short training swings between models that end their outputs after a
    few tokens and models that end them at once: the opus-mt variant's
    first seed gave 24 of 24 empty on an AMD EPYC after 300 and 1,000
    steps and none after 600, where an Intel Xeon had passed at 300."""
    src_ids = [ids_of(p, vocab) for p in run("spm_encode", f"--model={work}/source.spm", src_file).splitlines()]
    for model_seed, steps in training_schedule(seed):
        model = make_model(directory, work, vocab, fields, fmt, model_seed, steps)
        greedy = hf_generate(model, src_ids, num_beams=1)
        empty = sum(1 for y in greedy if not y)
        if empty <= SENTENCES - SENTENCES // 2:
            return model, greedy
    fail(f"{name}: the model is too weak to test search: {empty} of {SENTENCES} greedy outputs are empty "
         f"after {MODEL_SEEDS} seeds of {TRAIN_STEPS} and {2 * TRAIN_STEPS} steps")


def check_variant(name, fields, fmt, seed, tfm, work, data, vocab, ct2_converter):
    src_text = lines(os.path.join(data, "val.en.gz"), SENTENCES)
    tgt_text = lines(os.path.join(data, "val.de.gz"), SENTENCES)
    src_file, tgt_file = os.path.join(work, "src.txt"), os.path.join(work, "tgt.txt")
    with open(src_file, "w", encoding="utf-8") as f:
        f.write("\n".join(src_text) + "\n")
    with open(tgt_file, "w", encoding="utf-8") as f:
        f.write("\n".join(tgt_text) + "\n")

    d = os.path.join(work, name)
    model, greedy = searchable_model(name, d, work, vocab, fields, fmt, seed, src_file)
    ckpt = os.path.join(work, f"{name}.bin")
    run(f"{tfm}/tfm-convert", "-q", d, "-o", ckpt)
    pieces_of = {v: k for k, v in vocab.items()}
    src_pieces = run(f"{tfm}/tfm-tok", "-m", ckpt, src_file).splitlines()
    tgt_pieces = run(f"{tfm}/tfm-tok", "--side", "target", "-m", ckpt, tgt_file).splitlines()
    compare(name, "source pieces (tfm-tok vs spm_encode)", src_pieces,
            run("spm_encode", f"--model={d}/source.spm", src_file).splitlines())
    compare(name, "target pieces (tfm-tok --side target vs spm_encode)", tgt_pieces,
            run("spm_encode", f"--model={d}/target.spm", tgt_file).splitlines())
    src_ids = [ids_of(p, vocab) for p in src_pieces]
    tgt_ids = [ids_of(p, vocab) for p in tgt_pieces]

    # Forced decoding: every token's log-probability.
    with open(os.path.join(work, "src.pieces"), "w") as f:
        f.write("\n".join(src_pieces) + "\n")
    with open(os.path.join(work, "tgt.pieces"), "w") as f:
        f.write("\n".join(tgt_pieces) + "\n")
    scored = [json.loads(line) for line in run(f"{tfm}/tfm-score", "-q", "-m", ckpt, "--json", "--sentence-level",
                                               os.path.join(work, "src.pieces"),
                                               os.path.join(work, "tgt.pieces")).splitlines()
              if line.startswith("{") and "token_log_probs" in line]
    if len(scored) != SENTENCES:
        fail(f"{name}: tfm-score -m gave {len(scored)} sentences, not {SENTENCES}")
    worst = 0.0
    for i, s in enumerate(scored):
        want = hf_log_probs(model, src_ids[i], tgt_ids[i])
        got = s["token_log_probs"]
        if len(got) != len(want):
            fail(f"{name}: line {i + 1}: tfm scores {len(got)} tokens, transformers {len(want)}")
        worst = max(worst, log_prob_error(got, want))
    if worst > 1:
        fail(f"{name}: token log-probabilities differ by up to {worst:.3g} of the tolerance")

    # Search. generate's max_new_tokens counts the eos it forces at the end.
    src_pieces_file = os.path.join(work, "src.pieces")

    def tfm_decode(*opts):
        out = run(f"{tfm}/tfm-decode", "-q", "-m", ckpt, "--max-len-a", "0", "--max-len-b", str(MAX_NEW - 1),
                  *opts, src_pieces_file)
        return out.splitlines()

    def pieces(ids_list):
        return [" ".join(pieces_of[i] for i in ids) for ids in ids_list]

    compare(name, "greedy outputs", tfm_decode("--beam", "1"), pieces(greedy))
    beam = hf_generate(model, src_ids, num_beams=4, length_penalty=0.0, early_stopping=False)
    ended = [i for i, y in enumerate(beam) if len(y) < MAX_NEW - 1]
    if len(ended) < SENTENCES // 2:
        fail(f"{name}: only {len(ended)} of {SENTENCES} beam outputs end before the maximum length")
    ours = tfm_decode("--beam", "4", "--alpha", "0")
    compare(name, "beam-4 outputs (those that end)", [ours[i] for i in ended], [pieces(beam)[i] for i in ended])

    # The pipeline of the README, to text.
    text = run(f"{tfm}/tfm-tok", "-d", "-m", ckpt,
               stdin=run(f"{tfm}/tfm-decode", "-q", "-m", ckpt, "--beam", "1", "--max-len-a", "0",
                         "--max-len-b", str(MAX_NEW - 1),
                         stdin=run(f"{tfm}/tfm-tok", "-m", ckpt, src_file))).splitlines()
    compare(name, "detokenized greedy outputs", text,
            run("spm_decode", f"--model={d}/target.spm", stdin="\n".join(pieces(greedy)) + "\n").splitlines())

    if ct2_converter:
        import ctranslate2
        out = os.path.join(work, f"{name}.ct2")
        run(ct2_converter, "--model", d, "--output_dir", out, "--force")
        translator = ctranslate2.Translator(out, device="cpu")
        results = translator.translate_batch([p.split() + ["</s>"] for p in src_pieces], beam_size=1,
                                             max_decoding_length=MAX_NEW, min_decoding_length=0)
        compare(name, "greedy outputs (tfm vs CTranslate2)", tfm_decode("--beam", "1"),
                [" ".join(r.hypotheses[0]) for r in results])
    marian = ""
    # The variants Marian has: one embedding, swish or relu, scaled embeddings.
    if fields.get("share_encoder_decoder_embeddings", True) and fields.get("tie_word_embeddings", True) \
            and fields["activation_function"] in ("swish", "relu") and fields["scale_embedding"]:
        npz = write_marian(model, vocab, fields, os.path.join(work, f"{name}.marian"), d)
        run(f"{tfm}/tfm-convert", "-q", npz, "-o", f"{ckpt}.marian")
        with open(ckpt, "rb") as a, open(f"{ckpt}.marian", "rb") as b:
            if a.read() != b.read():
                fail(f"{name}: the Marian .npz of the same weights converts to another checkpoint")
        marian = ", the Marian .npz"
    print(f"convert_vs_transformers: {name} ({fmt}): pieces, log-probabilities (worst {worst:.2f} of the "
          "tolerance), greedy, "
          f"beam 4 ({len(ended)} that end){', CTranslate2' if ct2_converter else ''}, text{marian} agree "
          f"on {SENTENCES} sentences ({sum(1 for y in greedy if y)} greedy outputs not empty, "
          f"{sum(map(len, greedy)) / SENTENCES:.1f} tokens on average)")


def write_marian(model, vocab, fields, directory, hf_dir):
    """model's weights as Marian writes them (a transformers port of a Marian
    model, undone): returns the .npz's path."""
    os.makedirs(directory)
    c = model.config
    V = c.vocab_size - 1  # without the <pad> transformers' port adds
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    out = {"Wemb": sd["model.shared.weight"][:V], "decoder_ff_logit_out_b": sd["final_logits_bias"][:, :V]}

    def linear(marian, hf, p):
        out[f"{marian}_W{p}"] = sd[f"{hf}.weight"].T.copy()  # (in, out)
        out[f"{marian}_b{p}"] = sd[f"{hf}.bias"][None, :]

    def norm(marian, hf):
        out[f"{marian}_ln_scale"] = sd[f"{hf}.weight"][None, :]
        out[f"{marian}_ln_bias"] = sd[f"{hf}.bias"][None, :]

    def attention(marian, hf):
        for p in "qkv":
            linear(marian, f"{hf}.{p}_proj", p)
        linear(marian, f"{hf}.out_proj", "o")

    def ffn(marian, hf):
        linear(f"{marian}_ffn", f"{hf}.fc1", "1")
        linear(f"{marian}_ffn", f"{hf}.fc2", "2")
        norm(f"{marian}_ffn_ffn", f"{hf}.final_layer_norm")

    for side, layers in (("encoder", c.encoder_layers), ("decoder", c.decoder_layers)):
        for l in range(layers):
            m, h = f"{side}_l{l + 1}", f"model.{side}.layers.{l}"
            attention(f"{m}_self", f"{h}.self_attn")
            norm(f"{m}_self_Wo", f"{h}.self_attn_layer_norm")
            if side == "decoder":
                attention(f"{m}_context", f"{h}.encoder_attn")
                norm(f"{m}_context_Wo", f"{h}.encoder_attn_layer_norm")
            ffn(m, h)
    activation = {"swish": "swish", "silu": "swish", "relu": "relu"}.get(c.activation_function)
    if activation is None or not c.scale_embedding:
        fail(f"internal: Marian has no model of {fields}")
    yml = "\n".join([
        "type: transformer", f"dim-emb: {c.d_model}", f"enc-depth: {c.encoder_layers}",
        f"dec-depth: {c.decoder_layers}", f"transformer-heads: {c.encoder_attention_heads}",
        f"transformer-dim-ffn: {c.encoder_ffn_dim}", f"transformer-ffn-activation: {activation}",
        "transformer-ffn-depth: 2", 'transformer-preprocess: ""', "transformer-postprocess: dan",
        "transformer-postprocess-emb: d", "transformer-decoder-autoreg: self-attention",
        "tied-embeddings-all: true", "dim-vocabs:", f"  - {V}", f"  - {V}",
        f"transformer-dropout: {c.dropout}", f"transformer-dropout-attention: {c.attention_dropout}",
        "label-smoothing: 0.1", ""])
    out["special:model.yml"] = np.frombuffer(yml.encode() + b"\0", dtype=np.int8)  # a C string, as Marian writes it
    np.savez(os.path.join(directory, "model.npz"), **out)
    with open(os.path.join(directory, "opus.vocab.yml"), "w", encoding="utf-8") as f:
        for piece, i in sorted(vocab.items(), key=lambda kv: kv[1])[:V]:
            f.write(f"{json.dumps(piece, ensure_ascii=False)}: {i}\n")
    for side in ("source", "target"):
        with open(f"{hf_dir}/{side}.spm", "rb") as f, open(f"{directory}/{side}.spm", "wb") as g:
            g.write(f.read())
    return os.path.join(directory, "model.npz")


def check_fairseq(name, activation, tfm, work, data, vocab_pieces, seed):
    """A fairseq transformer checkpoint, laid out by fairseq's state-dict keys
    and options (args, an argparse.Namespace), its joined dictionary padded
    with madeupwords to a multiple of 8 as fairseq pads it; transformers'
    FSMT (its port of fairseq's WMT19 Transformer) holds the same weights
    and is the computation's reference."""
    import argparse
    from transformers import FSMTConfig, FSMTForConditionalGeneration
    d = os.path.join(work, name)
    os.makedirs(d)
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + vocab_pieces
    V = (len(pieces) + 7) // 8 * 8
    dictionary = pieces + [f"madeupword{i:04d}" for i in range(V - len(pieces))]
    ids = {p: i for i, p in enumerate(dictionary)}
    config = FSMTConfig(langs=["en", "de"], src_vocab_size=V, tgt_vocab_size=V, d_model=32, encoder_layers=2,
                        decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, activation_function=activation, dropout=0.0, max_position_embeddings=1024)
    src_pieces = open(os.path.join(work, "src.pieces"), encoding="utf-8").read().splitlines()
    tgt_pieces = open(os.path.join(work, "tgt.pieces"), encoding="utf-8").read().splitlines()
    to_ids = lambda text: [ids.get(p, ids["<unk>"]) for p in text.split()]  # noqa: E731

    def trained(seed, steps):
        torch.manual_seed(seed)
        model = FSMTForConditionalGeneration(config)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(steps):
            n = int(torch.randint(3, 13, (1,), generator=g))
            x = torch.cat([torch.randint(4, 24, (32, n), generator=g), torch.full((32, 1), 2)], 1)
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        return model.eval()

    def generate(model, **kw):
        out = []
        with torch.no_grad():
            for p in src_pieces:
                y = model.generate(torch.tensor([to_ids(p) + [2]]), max_new_tokens=MAX_NEW, do_sample=False,
                                   **kw)[0].tolist()[1:]
                out.append(" ".join(dictionary[t] for t in (y[:y.index(2)] if 2 in y else y)))
        return out

    # As searchable_model: trained longer or from the next seeds until search
    # can be compared (most greedy outputs not empty, a quarter of beam 4's
    # ending before the maximum length; fairseq-gelu's first seed had 3 of 24
    # on an AMD EPYC).
    for model_seed, steps in training_schedule(seed):
        model = trained(model_seed, steps)
        greedy = generate(model, num_beams=1)
        beam = generate(model, num_beams=4, length_penalty=0.0, early_stopping=False)
        ended = [i for i, y in enumerate(beam) if len(y.split()) < MAX_NEW - 1]
        if sum(1 for y in greedy if y) >= SENTENCES // 2 and len(ended) >= SENTENCES // 4:
            break
    else:
        fail(f"{name}: the model is too weak to test search: {sum(1 for y in greedy if not y)} of {SENTENCES} "
             f"greedy outputs empty, {len(ended)} beam outputs that end, after {MODEL_SEEDS} seeds")
    state = {k[len("model."):]: v.detach().clone() for k, v in model.state_dict().items()
             if "embed_positions" not in k}
    state["encoder.embed_positions._float_tensor"] = torch.FloatTensor(1)
    state["decoder.embed_positions._float_tensor"] = torch.FloatTensor(1)
    state["encoder.version"] = torch.Tensor([3])
    args = argparse.Namespace(
        arch="transformer", encoder_embed_dim=32, decoder_embed_dim=32, encoder_layers=2, decoder_layers=3,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
        activation_fn=activation, encoder_normalize_before=False, decoder_normalize_before=False,
        share_all_embeddings=False, share_decoder_input_output_embed=False, no_scale_embedding=False,
        encoder_learned_pos=False, decoder_learned_pos=False, max_source_positions=1024, max_target_positions=1024,
        dropout=0.0, attention_dropout=0.0, label_smoothing=0.1, source_lang="en", target_lang="de",
        adaptive_softmax_cutoff=None, layernorm_embedding=False)
    ckpt_pt = os.path.join(d, "checkpoint_best.pt")
    torch.save({"args": args, "model": state, "optimizer_history": [], "extra_state": {"epoch": 1}}, ckpt_pt)
    for lang in ("en", "de"):
        with open(os.path.join(d, f"dict.{lang}.txt"), "w", encoding="utf-8") as f:
            f.write("".join(f"{p} 1\n" for p in pieces[4:]))
    ckpt = os.path.join(work, f"{name}.bin")
    run(f"{tfm}/tfm-convert", "-q", ckpt_pt, "-o", ckpt, "--source-spm", f"{work}/source.spm",
        "--target-spm", f"{work}/target.spm")

    scored = [json.loads(line) for line in run(f"{tfm}/tfm-score", "-q", "-m", ckpt, "--json", "--sentence-level",
                                               os.path.join(work, "src.pieces"),
                                               os.path.join(work, "tgt.pieces")).splitlines()
              if line.startswith("{") and "token_log_probs" in line]
    worst = 0.0
    for i, sc in enumerate(scored):
        src, tgt = to_ids(src_pieces[i]) + [2], to_ids(tgt_pieces[i])
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([[2] + tgt]),
                           use_cache=False).logits[0]  # with the cache, FSMT reads the last input alone
        lp = torch.log_softmax(logits.double(), dim=-1)
        want = [float(lp[j, t]) for j, t in enumerate(tgt + [2])]
        if len(sc["token_log_probs"]) != len(want):
            fail(f"{name}: line {i + 1}: tfm scores {len(sc['token_log_probs'])} tokens, FSMT {len(want)}")
        worst = max(worst, log_prob_error(sc["token_log_probs"], want))
    if len(scored) != SENTENCES or worst > 1:
        fail(f"{name}: {len(scored)} sentences scored; token log-probabilities differ by up to {worst:.3g} "
             "of the tolerance")

    def tfm_decode(*opts):
        return run(f"{tfm}/tfm-decode", "-q", "-m", ckpt, "--max-len-a", "0", "--max-len-b", str(MAX_NEW - 1),
                   *opts, os.path.join(work, "src.pieces")).splitlines()

    compare(name, "greedy outputs (tfm vs FSMT)", tfm_decode("--beam", "1"), greedy)
    ours = tfm_decode("--beam", "4", "--alpha", "0")
    compare(name, "beam-4 outputs (tfm vs FSMT)", [ours[i] for i in ended], [beam[i] for i in ended])
    print(f"convert_vs_transformers: {name} (a fairseq .pt, FSMT's computation): log-probabilities (worst "
          f"{worst:.2f} of the tolerance), greedy ({sum(1 for y in greedy if y)} not empty), beam 4 ({len(ended)} "
          f"that end) agree on {SENTENCES} sentences")


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tfm, data, work = argv[1:]
    torch.set_num_threads(1)
    vocab = make_tokenizers(work, data)
    converter = os.path.join(os.path.dirname(sys.executable), "ct2-transformers-converter")
    for seed, (name, fields, fmt) in enumerate(VARIANTS):
        check_variant(name, fields, fmt, seed + 1, tfm, work, data, vocab,
                      converter if os.path.exists(converter) else None)
    pieces = [p for p in vocab if p not in ("</s>", "<unk>", "<pad>")]
    for seed, activation in enumerate(("relu", "gelu")):
        check_fairseq(f"fairseq-{activation}", activation, tfm, work, data, pieces, seed + 11)
    print("convert_vs_transformers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
