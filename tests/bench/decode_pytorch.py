#!/usr/bin/python3
# tests/bench/decode_pytorch.py: the reference for tests/bench/decode. An
# incremental beam search written with PyTorch the way fairseq's
# SequenceGenerator does it, over the same model, the same sentences, the
# same batches and the same forced output lengths as tfm's, and prints one
# machine-readable line:
#
#   RESULT tokens_per_s=X seconds=X cpu_seconds=X sentences=N tokens=N threads=N torch=VERSION device=D
#
# (cpu_seconds: the process's CPU time over the search, all threads)
#
# The model (libcore/model, the paper's "Model Architecture"): one embedding shared by
# source, target and output projection, scaled by sqrt(D); sinusoidal
# positions; post-norm layers; random weights (the output lengths are
# forced, so what the weights say does not matter for speed).
#
# The search: per batch, the encoder once; sentences x beam decoder rows,
# each step appending to per-layer key/value caches (torch.cat) and
# reordering them by the surviving beams (index_select), cross-attention
# keys and values computed once; log_softmax over the vocabulary, scores
# added, topk(2 * beam) over beam x vocabulary per sentence; eos masked until
# a sentence's forced length and forced at it; finished sentences leave the
# batch (their rows are dropped from every cache).
#
# --precision bf16 / fp16 (CUDA): weights, activations and caches in that
# type, the log-probabilities and scores in fp32 (as tfm's bf16 decoding).
#
# When torch cannot be imported it prints "NO_TORCH <reason>" and exits 4.
import argparse
import math
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from torch_reference import EXIT_NO_TORCH, import_torch, sinusoids  # noqa: E402

EOS, BOS = 3, 2


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch reference for tests/bench/decode")
    p.add_argument("--ids", required=True, help="source ids, one sentence a line")
    p.add_argument("--lengths", required=True, help="forced output lengths, one a line")
    p.add_argument("--vocab", type=int, default=37000)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    return p.parse_args()


def length_batches(lengths, max_tokens, batch_size):
    """tfm's batching (libcore/decode/translate.h): stable sort by length, then cut."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, begin = [], 0
    while begin < len(order):
        end = begin + 1
        while (end < len(order) and end - begin < batch_size
               and (end - begin + 1) * lengths[order[end]] <= max_tokens):
            end += 1
        batches.append(order[begin:end])
        begin = end
    return batches


def main():
    args = parse_args()
    torch = import_torch()
    if torch is None:
        return EXIT_NO_TORCH
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    D, V, H, L, W = args.d_model, args.vocab, args.heads, args.layers, args.beam
    K = D // H

    def linear(n_out, n_in):
        bound = math.sqrt(6.0 / (n_in + n_out))
        return ((torch.rand(n_out, n_in, device=device) * 2 - 1) * bound, torch.zeros(n_out, device=device))

    def norm():
        return (torch.ones(D, device=device), torch.zeros(D, device=device))

    def attention_weights():
        return {"q": linear(D, D), "k": linear(D, D), "v": linear(D, D), "o": linear(D, D)}

    embed = torch.randn(V, D, device=device) * D ** -0.5
    enc = [{"attn": attention_weights(), "n1": norm(), "f1": linear(args.d_ff, D),
            "f2": linear(D, args.d_ff), "n2": norm()} for _ in range(L)]
    dec = [{"self": attention_weights(), "n1": norm(), "cross": attention_weights(), "n2": norm(),
            "f1": linear(args.d_ff, D), "f2": linear(D, args.d_ff), "n3": norm()} for _ in range(L)]
    pe = sinusoids(torch, 4096, D).to(device)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    if dtype != torch.float32:
        if device.type != "cuda":
            raise SystemExit(f"decode_pytorch.py: --precision {args.precision} needs a CUDA device")

        def cast(w):
            if isinstance(w, dict):
                return {k: cast(v) for k, v in w.items()}
            if isinstance(w, tuple):
                return tuple(cast(v) for v in w)
            return w.to(dtype)

        embed, pe = cast(embed), cast(pe)
        enc, dec = [cast(w) for w in enc], [cast(w) for w in dec]

    def lin(x, w):
        return F.linear(x, w[0], w[1])

    def ln(x, w):
        return F.layer_norm(x, (D,), w[0], w[1])

    def heads(x):  # (N, T, D) -> (N, H, T, K)
        return x.view(x.shape[0], -1, H, K).transpose(1, 2)

    def attend(q, k, v, mask=None):  # q (N, H, Tq, K), k v (N, H, Tk, K)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(K)
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        ctx = torch.matmul(torch.softmax(s, dim=-1), v)
        return ctx.transpose(1, 2).reshape(q.shape[0], -1, D)

    def encode(src, src_pad):  # src (B, S)
        x = embed[src] * math.sqrt(D) + pe[: src.shape[1]]
        mask = src_pad[:, None, None, :]
        for w in enc:
            a = w["attn"]
            ctx = attend(heads(lin(x, a["q"])), heads(lin(x, a["k"])), heads(lin(x, a["v"])), mask)
            x = ln(x + lin(ctx, a["o"]), w["n1"])
            x = ln(x + lin(F.relu(lin(x, w["f1"])), w["f2"]), w["n2"])
        return x

    def search(sources, lengths):
        B = len(sources)
        S = max(len(s) for s in sources)
        src = torch.zeros(B, S, dtype=torch.long)
        for i, s in enumerate(sources):
            src[i, : len(s)] = torch.tensor(s)
        src_pad = (src == 0).to(device)
        for i, s in enumerate(sources):
            src_pad[i, len(s):] = True
            src_pad[i, : len(s)] = False
        memory = encode(src.to(device), src_pad)
        # Cross keys and values per layer, one copy per beam: (B * W, H, S, K).
        expand = torch.arange(B, device=device).repeat_interleave(W)
        cross = [(heads(lin(memory, w["cross"]["k"]))[expand], heads(lin(memory, w["cross"]["v"]))[expand])
                 for w in dec]
        cross_mask = src_pad[expand][:, None, None, :]
        cache = [None] * L
        alive = list(range(B))  # sentence of each block of W rows
        max_len = torch.tensor(lengths, device=device)
        scores = torch.zeros(B * W, device=device)
        scores.view(B, W)[:, 1:] = float("-inf")  # step 0: one live hypothesis a sentence
        tokens = torch.full((B * W, 1), BOS, dtype=torch.long, device=device)
        produced = 0
        for t in range(max(lengths) + 1):
            n = len(alive)
            x = embed[tokens[:, -1]] * math.sqrt(D) + pe[t]
            x = x.unsqueeze(1)  # (N, 1, D)
            for l, w in enumerate(dec):
                s = w["self"]
                k, v = heads(lin(x, s["k"])), heads(lin(x, s["v"]))
                if cache[l] is not None:
                    k, v = torch.cat([cache[l][0], k], 2), torch.cat([cache[l][1], v], 2)
                cache[l] = (k, v)
                x = ln(x + lin(attend(heads(lin(x, s["q"])), k, v), s["o"]), w["n1"])
                c = w["cross"]
                x = ln(x + lin(attend(heads(lin(x, c["q"])), cross[l][0], cross[l][1], cross_mask), c["o"]), w["n2"])
                x = ln(x + lin(F.relu(lin(x, w["f1"])), w["f2"]), w["n3"])
            lprobs = torch.log_softmax(torch.matmul(x.squeeze(1), embed.t()).float(), dim=-1)  # (N * W, V)
            lens = max_len[alive].repeat_interleave(W).unsqueeze(1)
            lprobs[:, EOS] = torch.where(lens[:, 0] > t, float("-inf"), lprobs[:, EOS])
            at_end = (lens[:, 0] == t).unsqueeze(1)
            lprobs = torch.where(at_end & (torch.arange(V, device=device) != EOS), float("-inf"), lprobs)
            cand = (scores.unsqueeze(1) + lprobs).view(n, W * V)
            top_scores, top_index = torch.topk(cand, 2 * W, dim=1)
            beam = top_index // V
            token = top_index % V
            # Forced lengths: no eos before the end, only eos at it: the first
            # W candidates continue (or end, all at once).
            beam, token, top_scores = beam[:, :W], token[:, :W], top_scores[:, :W]
            rows = (torch.arange(n, device=device).unsqueeze(1) * W + beam).view(-1)
            done = (max_len[alive] == t)
            produced += int((max_len[alive] * done).sum())
            keep = (~done).nonzero().view(-1)
            if len(keep) == 0:
                break
            if len(keep) < n:  # finished sentences leave the batch
                keep_rows = (keep.unsqueeze(1) * W + torch.arange(W, device=device)).view(-1)
                rows = rows.view(n, W)[keep].view(-1)
                top_scores, token = top_scores[keep], token[keep]
                cross = [(ck[keep_rows], cv[keep_rows]) for ck, cv in cross]
                cross_mask = cross_mask[keep_rows]
                alive = [alive[i] for i in keep.tolist()]
            cache = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in cache]
            tokens = torch.cat([tokens.index_select(0, rows), token.reshape(-1, 1)], 1)
            scores = top_scores.reshape(-1)
        return produced

    with open(args.ids) as f:
        sources = [[int(x) for x in line.split()] for line in f]
    with open(args.lengths) as f:
        lengths = [int(line) for line in f]
    if len(sources) != len(lengths) or any(len(s) == 0 for s in sources):
        raise SystemExit("decode_pytorch.py: --ids and --lengths must have one non-empty line each")
    batches = length_batches([len(s) for s in sources], args.max_tokens, args.batch_size)

    def run():
        tokens = 0
        for batch in batches:
            tokens += search([sources[i] for i in batch], [lengths[i] for i in batch])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return tokens

    with torch.inference_mode():
        start, cpu_start = time.perf_counter(), time.process_time()
        tokens = run()
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"RESULT tokens_per_s={tokens / seconds:.1f} seconds={seconds:.3f} cpu_seconds={cpu_seconds:.3f} "
          f"sentences={len(sources)} "
          f"tokens={tokens} threads={torch.get_num_threads()} torch={torch.__version__} device={device} "
          f"precision={args.precision}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
