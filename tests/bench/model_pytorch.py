#!/usr/bin/python3
# tests/bench/model_pytorch.py: the reference for tests/bench/model and
# tests/bench/train. Times forward + backward of the same Transformer in
# PyTorch (with --adam, a whole training step: the gradient norm and an Adam
# update with the paper's betas, epsilon and schedule, as tfm-train's), on a
# batch of the same shape and padding as tfm's, and prints one
# machine-readable line:
#
#   RESULT tokens_per_s=X seconds=X steps=N tokens=N params=N threads=N torch=VERSION device=D
#          peak_bytes=N precision=P attention=A adam=F compile=C variant=plain sdpa=S
#
# (peak_bytes: the CUDA caching allocator's peak reserved memory, 0 on the
# CPU; attention: sdpa when nn.Transformer's attention runs through
# scaled_dot_product_attention, torch >= 2.0, else math; adam: fused,
# foreach or plain; compile: on, off, or skipped:REASON; sdpa: the SDPA
# kernel the profiler saw in one more forward + backward after the timed
# steps, flash, efficient, cudnn or math, or none where torch has no SDPA)
#
# The GPU side (scripts/gpu-bench) adds --precision bf16 (autocast; fp32
# master weights and Adam state, as tfm's), --compile (torch.compile of the
# model, skipped with a note where torch has none, e.g. Debian's 1.13) and
# --batch FILE (tfm's own batch, so both time the same ids; without it, ids
# are drawn at random on the same lengths). The Adam step is fused on CUDA
# where torch has fused=True. The same file runs on Debian's torch 1.13
# (the CPU) and on current torch (2.11 on the GPU machine).
#
# The architecture follows libcore/model (the paper's "Model Architecture"): one embedding
# shared by source, target and the output projection, scaled by sqrt(D);
# sinusoidal positions; post-norm layers (no final norm unless --pre-norm);
# dropout on embeddings + positions and on every sub-layer output;
# label-smoothed cross-entropy summed over target tokens (padding excluded).
# nn.Transformer also drops out inside the feed-forward (after the ReLU) and
# on the attention weights (p = --dropout), which tfm does not.
#
# --strong is the reference at its best, beside the plain one: libcore/model's
# layers written out (no dropout inside the feed-forward; on the attention
# weights only --attention-dropout, default 0 as tfm's config) on packed
# rows, the sentences back to back, so every position-wise layer and the loss
# work on (tokens, D) rows with no padding. Attention is the first of these
# that runs a first forward + backward (a failure is a note on stderr):
# flex_attention over the whole packed batch with a block mask from each
# token's sentence; jagged nested tensors through scaled_dot_product_attention;
# padding inside attention alone (SDPA with a mask, or matmuls on torch 1.13).
# An SDPA path is pinned to the first kernel of flash, efficient, cudnn, math
# that runs its shapes. --compile compiles the loss function whole (its
# backward through AOTAutograd): logits in the autocast dtype, their fp32
# log-sum-exp fused by inductor, no fp32 (tokens, V) logits stored. Adam and
# schedule as the plain one's; parameter names are nn.Transformer's, so a
# state dict loads into either. Its RESULT line ends instead with
#
#          variant=strong attention_impl=flex|nested|padded sdpa=S loss=L
#
# (attention: flex, sdpa or math; sdpa: flex, the pinned kernel, or none;
# loss: lse-compiled or lse-eager).
#
# When torch cannot be imported it prints "NO_TORCH <reason>" and exits 4,
# so the caller can say so in one line. Run with /usr/bin/python3 (Debian's
# python3-torch); other interpreters on PATH may lack torch.
import argparse
import contextlib
import math
import os
import sys
import time
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from torch_reference import EXIT_NO_TORCH, import_torch, sinusoids  # noqa: E402


def parse_lengths(text):
    lengths = [int(x) for x in text.split(",") if x]
    if not lengths or min(lengths) < 1:
        raise SystemExit("model_pytorch.py: lengths must be positive integers")
    return lengths


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="PyTorch reference for tests/bench/model")
    p.add_argument("--vocab", type=int, default=37000)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--pre-norm", action="store_true")
    # Per-sentence lengths, comma-separated: sources (S_i) and decoder
    # inputs (T_i = target words + 1, bos in, eos out), as tfm's HostBatch.
    p.add_argument("--src-lengths", type=parse_lengths)
    p.add_argument("--tgt-lengths", type=parse_lengths)
    # Or the batch itself: a line a sentence, three tab-separated fields of
    # space-separated ids: source, decoder input (bos y), decoder output (y eos).
    p.add_argument("--batch", help="the batch's ids (instead of --src-lengths, --tgt-lengths)")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                   help="bf16 / fp16: autocast on CUDA (fp16 with a gradient scaler)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model when torch has it")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=1)
    # A whole training step: also the gradient norm and an Adam update.
    p.add_argument("--adam", action="store_true")
    p.add_argument("--warmup-steps", type=int, default=4000, help="of the learning-rate schedule")
    p.add_argument("--strong", action="store_true",
                   help="tfm's exact model on packed rows, the loss compiled with it (see the header)")
    p.add_argument("--attention-dropout", type=float, default=0.0,
                   help="on the attention weights, --strong only (the plain model uses --dropout)")
    args = p.parse_args(argv)
    if args.attention_dropout and not args.strong:
        p.error("--attention-dropout needs --strong (nn.Transformer's is --dropout)")
    return args


def read_batch(path):
    """(sources, decoder inputs, decoder outputs) from --batch's file."""
    src, tin, tout = [], [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                raise SystemExit(f"model_pytorch.py: {path}:{n}: not three tab-separated fields")
            s, i, o = ([int(x) for x in field.split()] for field in fields)
            if not s or not i or len(i) != len(o):
                raise SystemExit(f"model_pytorch.py: {path}:{n}: empty side or input/output lengths differ")
            src.append(s)
            tin.append(i)
            tout.append(o)
    if not src:
        raise SystemExit(f"model_pytorch.py: {path}: no sentences")
    return src, tin, tout


def plain_model(torch, args):
    """nn.Transformer with tfm's embeddings: forward(...) gives (B, T, V) logits."""
    import torch.nn as nn
    D, V = args.d_model, args.vocab

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D, padding_idx=0)
            nn.init.normal_(self.embed.weight, 0.0, D ** -0.5)
            self.register_buffer("pe", sinusoids(torch, 4096, D))
            self.drop = nn.Dropout(args.dropout)

            def norm():
                return nn.LayerNorm(D) if args.pre_norm else None

            enc_layer = nn.TransformerEncoderLayer(D, args.heads, args.d_ff, args.dropout,
                                                   batch_first=True, norm_first=args.pre_norm)
            dec_layer = nn.TransformerDecoderLayer(D, args.heads, args.d_ff, args.dropout,
                                                   batch_first=True, norm_first=args.pre_norm)
            self.transformer = nn.Transformer(
                d_model=D, nhead=args.heads, dim_feedforward=args.d_ff, dropout=args.dropout,
                batch_first=True, norm_first=args.pre_norm,
                custom_encoder=nn.TransformerEncoder(enc_layer, args.layers, norm=norm()),
                custom_decoder=nn.TransformerDecoder(dec_layer, args.layers, norm=norm()))

        def embed_positions(self, ids):
            x = self.embed(ids) * math.sqrt(D) + self.pe[: ids.shape[1]]
            return self.drop(x)

        def forward(self, src, tgt_in, src_pad, tgt_pad, causal):
            h = self.transformer(self.embed_positions(src), self.embed_positions(tgt_in),
                                 tgt_mask=causal, src_key_padding_mask=src_pad,
                                 tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
            return h @ self.embed.weight.t()  # tied output projection: (B, T, V)

    return Model()


def strong_model(torch, args):
    """--strong's model, libcore/model's layers on packed rows: forward(b, attend)
    gives the decoder's last states (Nt, D). Parameter names are nn.Transformer's."""
    import torch.nn as nn
    import torch.nn.functional as F
    D, V, H, p = args.d_model, args.vocab, args.heads, args.dropout

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj_weight = nn.Parameter(torch.empty(3 * D, D))  # W_Q, W_K, W_V stacked
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * D))
            self.out_proj = nn.Linear(D, D)

        def forward(self, x, memory, kind, attend):
            w, b = self.in_proj_weight, self.in_proj_bias
            if memory is None:
                q, k, v = F.linear(x, w, b).chunk(3, -1)
            else:  # queries from the decoder, keys and values from the encoder's output
                q = F.linear(x, w[:D], b[:D])
                k, v = F.linear(memory, w[D:], b[D:]).chunk(2, -1)
            q, k, v = (t.unflatten(-1, (H, D // H)) for t in (q, k, v))  # (N, H, K)
            return self.out_proj(attend(q, k, v, kind).flatten(-2))

    class Layer(nn.Module):
        def __init__(self, decoder):
            super().__init__()
            self.self_attn = Attention()
            self.multihead_attn = Attention() if decoder else None
            self.linear1, self.linear2 = nn.Linear(D, args.d_ff), nn.Linear(args.d_ff, D)
            self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.norm3 = nn.LayerNorm(D) if decoder else None

        def sublayer(self, norm, x, f):
            if args.pre_norm:
                return x + F.dropout(f(norm(x)), p, self.training)
            return norm(x + F.dropout(f(x), p, self.training))

        def ffn(self, x):  # W2 ReLU(W1 x + b1) + b2: no dropout inside, as tfm's
            return self.linear2(F.relu(self.linear1(x)))

        def forward(self, x, memory, attend):
            if memory is None:
                x = self.sublayer(self.norm1, x, lambda h: self.self_attn(h, None, "source", attend))
                return self.sublayer(self.norm2, x, self.ffn)
            x = self.sublayer(self.norm1, x, lambda h: self.self_attn(h, None, "target", attend))
            x = self.sublayer(self.norm2, x, lambda h: self.multihead_attn(h, memory, "cross", attend))
            return self.sublayer(self.norm3, x, self.ffn)

    class Stack(nn.Module):
        def __init__(self, decoder):
            super().__init__()
            self.layers = nn.ModuleList(Layer(decoder) for _ in range(args.layers))
            self.norm = nn.LayerNorm(D) if args.pre_norm else None

        def forward(self, x, memory, attend):
            for layer in self.layers:
                x = layer(x, memory, attend)
            return x if self.norm is None else self.norm(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D, padding_idx=0)
            nn.init.normal_(self.embed.weight, 0.0, D ** -0.5)
            self.register_buffer("pe", sinusoids(torch, 4096, D))
            self.transformer = nn.Module()
            self.transformer.encoder, self.transformer.decoder = Stack(False), Stack(True)
            for w in self.transformer.parameters():  # as nn.Transformer's _reset_parameters
                if w.dim() > 1:
                    nn.init.xavier_uniform_(w)

        def embed_positions(self, ids, pos):
            return F.dropout(self.embed(ids) * math.sqrt(D) + self.pe[pos], p, self.training)

        def forward(self, b, attend):
            memory = self.transformer.encoder(self.embed_positions(b["src"], b["src_pos"]), None, attend)
            return self.transformer.decoder(self.embed_positions(b["tgt_in"], b["tgt_pos"]), memory, attend)

    return Model()


def packed_batch(torch, src, tgt_in, tgt_out, src_pad, tgt_pad):
    """The padded batch's tokens back to back, sentence by sentence (tfm's
    packed rows): ids, each token's position and sentence, and per side the
    sentence lengths (CPU) and their offsets."""
    b = {}
    for side, ids, pad in (("src", {"src": src}, src_pad),
                           ("tgt", {"tgt_in": tgt_in, "tgt_out": tgt_out}, tgt_pad)):
        keep = ~pad
        b.update({name: t[keep] for name, t in ids.items()})
        b[side + "_pos"] = torch.arange(pad.shape[1]).expand_as(pad)[keep]
        b[side + "_doc"] = torch.arange(pad.shape[0]).unsqueeze(1).expand_as(pad)[keep]
        b[side + "_len"] = keep.sum(1)
        b[side + "_offsets"] = torch.cat([torch.zeros(1, dtype=torch.long), b[side + "_len"].cumsum(0)])
    return b


# attend(q, k, v, kind) for --strong: q (Nq, H, K), k and v (Nk, H, K), packed
# rows, to (Nq, H, K). kind: "source" (a source token to its sentence's),
# "target" (a target token to its sentence's up to itself) or "cross" (a
# target token to its sentence's source tokens). Queries and keys by side:
SIDES = {"source": ("src", "src"), "target": ("tgt", "tgt"), "cross": ("tgt", "src")}


def flex_attention(torch, args, b, device, compiled):
    """The packed batch as one sequence (1, H, N, K); a block mask from each
    token's sentence skips the blocks of other sentences."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention as flex
    if args.attention_dropout:
        raise RuntimeError("flex_attention has no dropout on the attention weights")
    docs = {side: b[side + "_doc"].to(device) for side in ("src", "tgt")}

    def block_mask(kind):
        qdoc, kdoc = (docs[side] for side in SIDES[kind])

        def visible(batch, head, i, j):
            same = qdoc[i] == kdoc[j]
            return same & (i >= j) if kind == "target" else same  # packed in order: causal is i >= j

        return create_block_mask(visible, None, None, len(qdoc), len(kdoc), device=device)

    masks = {kind: block_mask(kind) for kind in SIDES}
    run = flex if compiled else torch.compile(flex)  # flex_attention is a kernel only when compiled

    def attend(q, k, v, kind):
        # Contiguous (1, H, N, K): inductor's flex lowering refuses views of a linear's output.
        q, k, v = (t.transpose(0, 1).unsqueeze(0).contiguous() for t in (q, k, v))
        return run(q, k, v, block_mask=masks[kind])[0].transpose(0, 1)

    return attend


def nested_attention(torch, args, b, device, compiled):
    """Each sentence its own sequence: jagged nested tensors (B, H, j, K) over
    the packed rows, no copy, through scaled_dot_product_attention."""
    import torch.nn.functional as F
    from torch.nested import nested_tensor_from_jagged
    offsets = {side: b[side + "_offsets"].to(device) for side in ("src", "tgt")}
    longest = {side: int(b[side + "_len"].max()) for side in ("src", "tgt")}
    shortest = {side: int(b[side + "_len"].min()) for side in ("src", "tgt")}

    def jagged(t, side):  # known lengths: no device sync to find them
        return nested_tensor_from_jagged(t, offsets[side], min_seqlen=shortest[side],
                                         max_seqlen=longest[side]).transpose(1, 2)

    def attend(q, k, v, kind):
        qs, ks = SIDES[kind]
        o = F.scaled_dot_product_attention(jagged(q, qs), jagged(k, ks), jagged(v, ks),
                                           dropout_p=args.attention_dropout, is_causal=kind == "target")
        return o.transpose(1, 2).values()

    return attend


def padded_attention(torch, args, b, device, compiled):
    """Each sentence padded to the batch's longest inside attention alone
    (B, H, L, K), with a mask; SDPA where torch has it, else matmuls."""
    import torch.nn.functional as F
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    B, H = len(b["src_len"]), args.heads
    L = {side: int(b[side + "_len"].max()) for side in ("src", "tgt")}
    rows = {side: (b[side + "_doc"] * L[side] + b[side + "_pos"]).to(device) for side in ("src", "tgt")}
    keys = {side: (torch.arange(L[side]) < b[side + "_len"].unsqueeze(1))[:, None, None]  # (B, 1, 1, L)
            for side in ("src", "tgt")}
    masks = {"source": keys["src"], "cross": keys["src"],  # True = attend
             "target": keys["tgt"] & torch.ones(L["tgt"], L["tgt"], dtype=torch.bool).tril()}
    masks = {kind: m.to(device) for kind, m in masks.items()}

    def pad(t, side):
        full = t.new_zeros(B * L[side], H, t.shape[-1]).index_copy(0, rows[side], t)
        return full.unflatten(0, (B, L[side])).transpose(1, 2)

    def attend(q, k, v, kind):
        qs, ks = SIDES[kind]
        q, k, v, mask = pad(q, qs), pad(k, ks), pad(v, ks), masks[kind]
        if sdpa is not None:
            o = sdpa(q, k, v, attn_mask=mask, dropout_p=args.attention_dropout)
        else:
            s = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).masked_fill(~mask, float("-inf"))
            o = F.dropout(s.softmax(-1), args.attention_dropout) @ v
        return o.transpose(1, 2).flatten(0, 1)[rows[qs]]

    return attend


def pin_sdpa(torch, args, b, device, dtype, attend, pin):
    """The first SDPA kernel of flash, efficient, cudnn, math that runs
    attend forward and backward on the batch's shapes and dtype; pin enters
    it (sdpa_kernel), so it is the only one enabled from then on."""
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return "none"  # torch 1.13: matmuls and a softmax
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return "unpinned"  # 2.0 to 2.2: the dispatcher's choice, not recorded
    H, K, refusal = args.heads, args.d_model // args.heads, None
    n = {"src": len(b["src"]), "tgt": len(b["tgt_in"])}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel([backend]), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # each refusal warns why
                for kind, (qs, ks) in SIDES.items():
                    q, k, v = (torch.randn(n[s], H, K, device=device, dtype=dtype, requires_grad=True)
                               for s in (qs, ks, ks))
                    attend(q, k, v, kind).float().sum().backward()
        except Exception as e:  # noqa: BLE001 (a refusal, or a kernel this device lacks)
            refusal = e
            continue
        pin.enter_context(sdpa_kernel([backend]))
        return {"FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION": "efficient",
                "CUDNN_ATTENTION": "cudnn", "MATH": "math"}[name]
    raise RuntimeError(f"no SDPA kernel runs these shapes (last: {refusal})")


def strong_loss(torch, args, model, b, attend):
    """--strong's loss: label-smoothed cross-entropy summed over the target
    tokens, from the logits (in the autocast dtype) through an fp32
    log-sum-exp: loss_i = lse_i - (1 - eps) z_i[y_i] - eps mean_v z_i[v], as
    F.cross_entropy's smoothing. Compiled, inductor fuses the upcast into the
    reductions and their backward."""
    eps, V = args.label_smoothing, args.vocab
    target = b["tgt_out"].unsqueeze(1)

    def loss():
        z = (model(b, attend) @ model.embed.weight.t()).float()  # (Nt, V)
        lse = torch.logsumexp(z, -1)
        return (lse - (1 - eps) * z.gather(1, target).squeeze(1) - eps / V * z.sum(-1)).sum()

    return loss


def strong_setup(torch, args, model, packed, device, amp, compiled, autocast, pin):
    """(loss function, attention impl, SDPA kernel) for --strong: the first
    attention that runs a first forward + backward (compiling it, with
    --compile); each failure is a note on stderr, and the next is tried."""
    batch = {name: t.to(device) for name, t in packed.items()}
    for impl, build in (("flex", flex_attention), ("nested", nested_attention), ("padded", padded_attention)):
        try:
            attend = build(torch, args, packed, device, compiled)
            sdpa = "flex" if impl == "flex" else pin_sdpa(torch, args, packed, device, amp or torch.float32,
                                                            attend, pin)
            loss = strong_loss(torch, args, model, batch, attend)
            loss = torch.compile(loss) if compiled else loss
            with autocast():
                loss().backward()
            model.zero_grad(set_to_none=True)
            return loss, impl, sdpa
        except Exception as e:  # noqa: BLE001 (whatever failed, the next may run)
            if impl == "padded":
                raise
            why = (str(e).strip().splitlines() or [""])[0][:200]
            print(f"note: --strong: {impl} attention failed ({type(e).__name__}: {why}); trying the next",
                  file=sys.stderr)
            pin.close()
            model.zero_grad(set_to_none=True)
            if compiled:
                torch._dynamo.reset()


def sdpa_seen(torch, fn):
    """The SDPA kernel the profiler sees while fn() runs; math when torch has
    SDPA but no fused kernel ran (the math path is plain matmuls, also once
    inductor has decomposed it); none where torch has no SDPA."""
    import torch.nn.functional as F
    if not hasattr(F, "scaled_dot_product_attention"):
        return "none"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    names = " ".join(e.key for e in prof.key_averages())
    for key, name in (("cudnn_attention", "cudnn"), ("flash_attention", "flash"),
                      ("efficient_attention", "efficient")):
        if key in names:
            return name
    return "math"


def main():
    args = parse_args()
    if args.batch:
        batch_ids = read_batch(args.batch)
        args.src_lengths = [len(s) for s in batch_ids[0]]
        args.tgt_lengths = [len(t) for t in batch_ids[1]]
    elif not args.src_lengths or not args.tgt_lengths:
        raise SystemExit("model_pytorch.py: give --batch or both --src-lengths and --tgt-lengths")
    else:
        batch_ids = None
    torch = import_torch()
    if torch is None:
        return EXIT_NO_TORCH
    import torch.nn as nn
    import torch.nn.functional as F

    if len(args.src_lengths) != len(args.tgt_lengths):
        raise SystemExit("model_pytorch.py: --src-lengths and --tgt-lengths differ in count")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("model_pytorch.py: this torch build has no usable CUDA device")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    D, V = args.d_model, args.vocab

    model = (strong_model if args.strong else plain_model)(torch, args).to(device).train()
    params = sum(p.numel() for p in model.parameters())

    # The batch: ids in [4, V) (0..3 are pad, unk, bos, eos), padded after
    # each sentence to the longest one; targets past the end are -1 (ignored).
    B = len(args.src_lengths)
    S, T = max(args.src_lengths), max(args.tgt_lengths)
    src = torch.randint(4, V, (B, S))
    tgt_in = torch.randint(4, V, (B, T))
    tgt_out = torch.randint(4, V, (B, T))
    if batch_ids is not None:
        for b, (s, i, o) in enumerate(zip(*batch_ids)):
            src[b, : len(s)] = torch.tensor(s)
            tgt_in[b, : len(i)] = torch.tensor(i)
            tgt_out[b, : len(o)] = torch.tensor(o)
        if int(max(src.max(), tgt_in.max(), tgt_out.max())) >= V:
            raise SystemExit(f"model_pytorch.py: {args.batch}: an id is not below --vocab {V}")
    src_len = torch.tensor(args.src_lengths).unsqueeze(1)
    tgt_len = torch.tensor(args.tgt_lengths).unsqueeze(1)
    src_pad = torch.arange(S).unsqueeze(0) >= src_len  # (B, S), True = padding
    tgt_pad = torch.arange(T).unsqueeze(0) >= tgt_len  # (B, T)
    src[src_pad] = 0
    tgt_in[tgt_pad] = 0
    tgt_out[tgt_pad] = -1
    tokens = int(sum(args.tgt_lengths))
    packed = packed_batch(torch, src, tgt_in, tgt_out, src_pad, tgt_pad) if args.strong else None
    src, tgt_in, tgt_out = src.to(device), tgt_in.to(device), tgt_out.to(device)
    src_pad, tgt_pad = src_pad.to(device), tgt_pad.to(device)
    causal = nn.Transformer.generate_square_subsequent_mask(T).to(device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # The paper's optimizer (the paper's section "Training"), as libcore/train/optimizer.h:
    # fused into a few kernels on CUDA where torch can (fused=True, torch >= 1.13).
    adam_kind = "plain"
    opt = None
    if device.type == "cuda":
        try:
            opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
            adam_kind = "fused"
        except (TypeError, RuntimeError):
            opt = None
    if opt is None:
        opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
        adam_kind = "foreach" if opt.defaults.get("foreach") else "plain"
    updates = 0

    # Mixed precision: fp32 weights and optimizer state, the forward and
    # backward under autocast (as tfm's bf16: fp32 master weights).
    amp = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    if amp is not None and device.type != "cuda":
        raise SystemExit(f"model_pytorch.py: --precision {args.precision} needs a CUDA device")
    scaler = None
    if args.precision == "fp16":
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    attention = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "math"
    forward = model
    compiled = "off"
    if args.compile:
        if not hasattr(torch, "compile"):
            compiled = "skipped:no-torch.compile-in-" + torch.__version__
            print(f"note: torch {torch.__version__} has no torch.compile; timing the eager model",
                  file=sys.stderr)
        else:
            forward = model if args.strong else torch.compile(model)  # --strong compiles its loss
            compiled = "on"

    def plain_loss():
        logits = forward(src, tgt_in, src_pad, tgt_pad, causal)
        return F.cross_entropy(logits.reshape(-1, V).float(), tgt_out.reshape(-1), ignore_index=-1,
                               label_smoothing=args.label_smoothing, reduction="sum")

    def autocast():
        return contextlib.nullcontext() if amp is None else torch.autocast(device_type="cuda", dtype=amp)

    loss_of = plain_loss
    pin = contextlib.ExitStack()  # --strong's SDPA kernel, held to the end
    if args.strong:
        if compiled == "off":
            print("note: --strong without --compile: the model and the loss run eagerly", file=sys.stderr)
        loss_of, impl, sdpa = strong_setup(torch, args, model, packed, device, amp, compiled == "on",
                                           autocast, pin)
        attention = "flex" if impl == "flex" else attention

    def step():
        nonlocal updates
        model.zero_grad(set_to_none=False)  # as tfm's zero_grads: a memset
        with autocast():
            loss = loss_of()
        if not args.adam:
            loss.backward()
            return
        loss = loss / tokens  # the mean token loss, as tfm-train's
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), float("inf"))  # the norm tfm-train reports
        updates += 1
        for g in opt.param_groups:
            g["lr"] = D ** -0.5 * min(updates ** -0.5, updates * args.warmup_steps ** -1.5)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    for _ in range(args.warmup):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_reserved(device) if device.type == "cuda" else 0  # before the profiled pass
    if args.strong:
        how = (f"variant=strong attention_impl={impl} sdpa={sdpa} "
               f"loss={'lse-compiled' if compiled == 'on' else 'lse-eager'}")
    else:
        def once():
            with autocast():
                loss_of().backward()
            sync()
        how = f"variant=plain sdpa={sdpa_seen(torch, once)}"
    pin.close()
    print(f"RESULT tokens_per_s={tokens * args.steps / seconds:.1f} seconds={seconds:.3f} "
          f"steps={args.steps} tokens={tokens} params={params} threads={torch.get_num_threads()} "
          f"torch={torch.__version__} device={device} "
          f"peak_bytes={peak} "
          f"precision={args.precision} attention={attention} adam={adam_kind} compile={compiled} {how}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
