#!/usr/bin/python3
# tests/bench/model_pytorch.py: the reference for tests/bench/model and
# tests/bench/train. Times forward + backward of the same Transformer in
# PyTorch (with --adam, a whole training step: the gradient norm and an Adam
# update with the paper's betas, epsilon and schedule, as tfm-train's), on a
# batch of the same shape and padding as tfm's, and prints one
# machine-readable line:
#
#   RESULT tokens_per_s=X seconds=X steps=N tokens=N params=N threads=N torch=VERSION device=D
#          peak_bytes=N precision=P attention=A adam=F compile=C
#
# (peak_bytes: the CUDA caching allocator's peak reserved memory, 0 on the
# CPU; attention: sdpa when nn.Transformer's attention runs through
# scaled_dot_product_attention, torch >= 2.0, else math; adam: fused,
# foreach or plain; compile: on, off, or skipped:REASON)
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
#
# When torch cannot be imported it prints "NO_TORCH <reason>" and exits 4,
# so the caller can say so in one line. Run with /usr/bin/python3 (Debian's
# python3-torch); other interpreters on PATH may lack torch.
import argparse
import math
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from torch_reference import EXIT_NO_TORCH, import_torch, sinusoids  # noqa: E402


def parse_lengths(text):
    lengths = [int(x) for x in text.split(",") if x]
    if not lengths or min(lengths) < 1:
        raise SystemExit("model_pytorch.py: lengths must be positive integers")
    return lengths


def parse_args():
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
    return p.parse_args()


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

    model = Model().to(device).train()
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
            forward = torch.compile(model)
            compiled = "on"

    def loss_of():
        logits = forward(src, tgt_in, src_pad, tgt_pad, causal)
        return F.cross_entropy(logits.reshape(-1, V).float(), tgt_out.reshape(-1), ignore_index=-1,
                               label_smoothing=args.label_smoothing, reduction="sum")

    def step():
        nonlocal updates
        model.zero_grad(set_to_none=False)  # as tfm's zero_grads: a memset
        if amp is None:
            loss = loss_of()
        else:
            with torch.autocast(device_type="cuda", dtype=amp):
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
    print(f"RESULT tokens_per_s={tokens * args.steps / seconds:.1f} seconds={seconds:.3f} "
          f"steps={args.steps} tokens={tokens} params={params} threads={torch.get_num_threads()} "
          f"torch={torch.__version__} device={device} "
          f"peak_bytes={torch.cuda.max_memory_reserved(device) if device.type == 'cuda' else 0} "
          f"precision={args.precision} attention={attention} adam={adam_kind} compile={compiled}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
