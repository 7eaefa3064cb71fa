#!/usr/bin/python3
"""tfm's Transformer against the same model rebuilt from PyTorch's own layers.

    model_vs_pytorch.py DIR

DIR holds what model_fixture wrote: params.bin (the parameters, read with
the independent reader tfm_checkpoint.py) and results.bin (tfm's
log-probabilities, loss sums, gradients and the batch). This script builds
the model from torch.nn.Linear, nn.LayerNorm, F.embedding and, when
d_k = d_v = d_model / h, nn.MultiheadAttention (its packed in_proj loaded
from the separate q/k/v weights); otherwise (Table 3 row B) attention is
written by hand from nn.Linear and softmax. Pre-norm (with the final
encoder and decoder layer norms), learned positions and separate source and
target embeddings follow the config as tfm does. It runs in float32 on the CPU,
takes the loss from F.cross_entropy(label_smoothing=eps_ls, reduction='sum')
and the gradients from loss.backward(), and compares:

  log_probs  max |tfm - torch| <= 1e-5 * max |torch| over the (B*T, V) rows
             of real target positions (tfm leaves the padding rows 0, which
             is checked exactly).
             Relative to the largest value, not elementwise: a log-softmax
             output carries the absolute error of its logits, and entries
             near 0 (the likely tokens) would make an elementwise relative
             test measure nothing but their own smallness.
  loss, nll  |tfm - torch| <= 1e-5 * |torch|.
  grad.*     ||tfm - torch||_2 <= 1e-4 * ||torch||_2 + floor, per tensor,
             floor = 1e-7 * (norm of the whole torch gradient). The floor is
             for gradients that are exactly zero mathematically (k_proj.bias:
             a key bias adds the same q.b to every score of a query row,
             which softmax ignores), where both sides hold rounding noise.

Prints a table of the worst entries and exits 1 on any failure, and on a
missing Python module (never a skip).
"""
import math
import os
import sys

_missing = []
try:
    import numpy as np
except ImportError:
    _missing.append(("numpy", "python3-numpy"))
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    _missing.append(("torch", "python3-torch"))
try:
    import zstandard  # noqa: F401 (tfm_checkpoint needs it)
except ImportError:
    _missing.append(("zstandard", "python3-zstandard"))
if _missing:
    for module, package in _missing:
        print(f"model_vs_pytorch: FAIL: {sys.executable} cannot import {module}; "
              f"install Debian's {package} (apt-get install {package})", file=sys.stderr)
    sys.exit(1)

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfm_checkpoint  # noqa: E402

PAD = 0  # what a batch holds past each sentence (the model never reads it)
LOG_PROBS_RTOL = 1e-5  # of max |log p|
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4       # of the tensor's gradient norm
GRAD_FLOOR = 1e-7      # of the whole gradient's norm


def fail(msg):
    print(f"model_vs_pytorch: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


# ------------------------------------------------------------------ config

CONFIG_TYPES = {
    "vocab_size": int, "d_model": int, "d_ff": int, "heads": int,
    "d_k": int, "d_v": int, "dropout": float, "attention_dropout": float,
    "label_smoothing": float, "learned_positions": "bool", "max_positions": int,
    "share_embeddings": "bool", "pre_norm": "bool", "layer_norm_eps": float,
}
# Keys a configuration writes only where they differ from these (man/tfm.7):
# the depths (one "layers" when equal), and the variants of models converted
# from other toolkits.
OPTIONAL = {
    "activation": ("relu", str), "scale_embeddings": (True, "bool"),
    "position_layout": ("interleaved", str), "position_offset": (0, int),
    "tie_output": (True, "bool"), "output_bias": (False, "bool"),
    "decoder_start_id": (2, int), "eos_id": (3, int), "source_eos": (False, "bool"),
}


def parse_config(text):
    """The 'key = value' text of man/tfm.7; every key must be known."""
    cfg = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("["):
            continue
        key, sep, value = (s.strip() for s in line.partition("="))
        depth = key in ("layers", "encoder_layers", "decoder_layers")
        if not sep or not (key in CONFIG_TYPES or key in OPTIONAL or depth):
            fail(f"config line {line!r} is not a known 'key = value'")
        kind = int if depth else CONFIG_TYPES[key] if key in CONFIG_TYPES else OPTIONAL[key][1]
        cfg[key] = value in ("true", "1", "yes") if kind == "bool" else kind(value)
    missing = set(CONFIG_TYPES) - set(cfg)
    if missing:
        fail(f"config lacks {sorted(missing)}")
    for key, (default, _) in OPTIONAL.items():
        cfg.setdefault(key, default)
    if "layers" in cfg:
        cfg.setdefault("encoder_layers", cfg["layers"])
        cfg.setdefault("decoder_layers", cfg["layers"])
    if "encoder_layers" not in cfg or "decoder_layers" not in cfg:
        fail("config gives neither layers nor both encoder_layers and decoder_layers")
    return cfg


ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}  # F.gelu: the exact (erf) form


# ------------------------------------------------------------------- model

class HandAttention(nn.Module):
    """softmax(mask(q k^T / sqrt(K))) v per head, heads = contiguous column
    chunks of the projections; for any K, E (Table 3 row B)."""

    def __init__(self, d, h, dk, dv):
        super().__init__()
        self.h, self.dk, self.dv = h, dk, dv
        self.q_proj, self.k_proj = nn.Linear(d, h * dk), nn.Linear(d, h * dk)
        self.v_proj, self.out_proj = nn.Linear(d, h * dv), nn.Linear(h * dv, d)

    def forward(self, xq, xkv, hidden):  # hidden: (B, Tq, Tk) bool, True = masked
        b, tq, tk = xq.shape[0], xq.shape[1], xkv.shape[1]
        q = self.q_proj(xq).view(b, tq, self.h, self.dk).transpose(1, 2)
        k = self.k_proj(xkv).view(b, tk, self.h, self.dk).transpose(1, 2)
        v = self.v_proj(xkv).view(b, tk, self.h, self.dv).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dk)
        scores = scores.masked_fill(hidden[:, None], float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, Tq, E)
        return self.out_proj(ctx.transpose(1, 2).reshape(b, tq, self.h * self.dv))

    def tfm_params(self, prefix):
        """tfm name -> (torch parameter, rows of it or None)."""
        return {f"{prefix}{p}.{w}": (getattr(self, p).get_parameter(w), None)
                for p in ("q_proj", "k_proj", "v_proj", "out_proj") for w in ("weight", "bias")}


class TorchAttention(nn.Module):
    """nn.MultiheadAttention, for d_k = d_v = d_model / h."""

    def __init__(self, d, h):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, h, dropout=0.0, bias=True, batch_first=True)

    def forward(self, xq, xkv, hidden):
        b, tq, tk = xq.shape[0], xq.shape[1], xkv.shape[1]
        # A (B * H, Tq, Tk) mask: padding and causality in one, as tfm's softmax.
        mask = hidden[:, None].expand(b, self.mha.num_heads, tq, tk).reshape(-1, tq, tk)
        out, _ = self.mha(xq, xkv, xkv, attn_mask=mask, need_weights=False)
        return out

    def tfm_params(self, prefix):
        d = self.mha.embed_dim
        m = {}
        for i, p in enumerate(("q_proj", "k_proj", "v_proj")):
            m[f"{prefix}{p}.weight"] = (self.mha.in_proj_weight, slice(i * d, (i + 1) * d))
            m[f"{prefix}{p}.bias"] = (self.mha.in_proj_bias, slice(i * d, (i + 1) * d))
        m[f"{prefix}out_proj.weight"] = (self.mha.out_proj.weight, None)
        m[f"{prefix}out_proj.bias"] = (self.mha.out_proj.bias, None)
        return m


def make_attention(c):
    d, h = c["d_model"], c["heads"]
    if c["d_k"] == c["d_v"] == d // h and d % h == 0:
        return TorchAttention(d, h)
    return HandAttention(d, h, c["d_k"], c["d_v"])


class Layer(nn.Module):
    """One encoder (cross=False) or decoder layer; sub-layers post-norm
    LN(x + f(x)) or pre-norm x + f(LN(x))."""

    def __init__(self, c, cross):
        super().__init__()
        d, eps = c["d_model"], c["layer_norm_eps"]
        self.pre_norm = c["pre_norm"]
        self.self_attn = make_attention(c)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.encoder_attn = make_attention(c) if cross else None
        self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=eps) if cross else None
        self.fc1, self.fc2 = nn.Linear(d, c["d_ff"]), nn.Linear(c["d_ff"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)
        self.act = ACTIVATIONS[c["activation"]]

    def sublayer(self, x, norm, f):
        return x + f(norm(x)) if self.pre_norm else norm(x + f(x))

    def forward(self, x, self_hidden, enc=None, cross_hidden=None):
        x = self.sublayer(x, self.self_attn_layer_norm, lambda z: self.self_attn(z, z, self_hidden))
        if self.encoder_attn is not None:
            x = self.sublayer(x, self.encoder_attn_layer_norm,
                              lambda z: self.encoder_attn(z, enc, cross_hidden))
        return self.sublayer(x, self.final_layer_norm, lambda z: self.fc2(self.act(self.fc1(z))))

    def tfm_params(self, prefix):
        m = self.self_attn.tfm_params(prefix + "self_attn.")
        if self.encoder_attn is not None:
            m.update(self.encoder_attn.tfm_params(prefix + "encoder_attn."))
        for name, mod in self.named_children():
            if isinstance(mod, (nn.Linear, nn.LayerNorm)):
                m[f"{prefix}{name}.weight"] = (mod.weight, None)
                m[f"{prefix}{name}.bias"] = (mod.bias, None)
        return m


def sinusoids(positions, d, layout="interleaved", offset=0):
    """The position table of rows offset .. offset + positions - 1.
    interleaved (the paper): PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) =
    cos(same); halves (Marian): the sines in columns 0 .. D/2 - 1, the cosines
    after them; both in float64, then f32. fairseq: as fairseq's
    SinusoidalPositionalEmbedding computes it, in float32:
    exp(-i log(10000) / (D/2 - 1)) as frequencies, sines then cosines."""
    if layout == "fairseq":
        half = d // 2
        freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        angle = torch.arange(offset, offset + positions, dtype=torch.float)[:, None] * freq[None, :]
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    p = np.arange(offset, offset + positions, dtype=np.float64)[:, None]
    i = np.arange(0, d, 2, dtype=np.float64)[None, :]
    angle = p / np.power(10000.0, i / d)
    pe = np.zeros((positions, d))
    if layout == "halves":
        pe[:, : d // 2], pe[:, d // 2:] = np.sin(angle), np.cos(angle)
    else:
        pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(pe.astype(np.float32))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        v, d = c["vocab_size"], c["d_model"]
        if c["share_embeddings"]:
            self.embed = nn.Embedding(v, d)
            self.src_embed = self.tgt_embed = self.embed
        else:
            self.src_embed, self.tgt_embed = nn.Embedding(v, d), nn.Embedding(v, d)
        if c["learned_positions"]:
            self.src_pos = nn.Parameter(torch.zeros(c["max_positions"], d))
            self.tgt_pos = nn.Parameter(torch.zeros(c["max_positions"], d))
        self.encoder = nn.ModuleList(Layer(c, cross=False) for _ in range(c["encoder_layers"]))
        self.decoder = nn.ModuleList(Layer(c, cross=True) for _ in range(c["decoder_layers"]))
        if c["pre_norm"]:
            self.encoder_norm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
            self.decoder_norm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        # The pre-softmax weights: the target embedding, or their own; a bias.
        self.output = self.tgt_embed if c["tie_output"] else nn.Linear(d, v, bias=False)
        self.output_bias = nn.Parameter(torch.zeros(v)) if c["output_bias"] else None

    def tfm_params(self):
        c = self.c
        if c["share_embeddings"]:
            m = {"embed.weight": (self.embed.weight, None)}
        else:
            m = {"encoder.embed_tokens.weight": (self.src_embed.weight, None),
                 "decoder.embed_tokens.weight": (self.tgt_embed.weight, None)}
        if c["learned_positions"]:
            m["encoder.embed_positions.weight"] = (self.src_pos, None)
            m["decoder.embed_positions.weight"] = (self.tgt_pos, None)
        for l, layer in enumerate(self.encoder):
            m.update(layer.tfm_params(f"encoder.layers.{l}."))
        for l, layer in enumerate(self.decoder):
            m.update(layer.tfm_params(f"decoder.layers.{l}."))
        if c["pre_norm"]:
            for side, norm in (("encoder", self.encoder_norm), ("decoder", self.decoder_norm)):
                m[f"{side}.layer_norm.weight"] = (norm.weight, None)
                m[f"{side}.layer_norm.bias"] = (norm.bias, None)
        if not c["tie_output"]:
            m["decoder.output_projection.weight"] = (self.output.weight, None)
        if c["output_bias"]:
            m["decoder.output_bias"] = (self.output_bias, None)
        return m

    def embed_tokens(self, ids, table, learned):
        d, t = self.c["d_model"], ids.shape[1]
        x = F.embedding(ids, table.weight) * (math.sqrt(d) if self.c["scale_embeddings"] else 1.0)
        if self.c["learned_positions"]:
            return x + learned[:t]
        return x + sinusoids(t, d, self.c["position_layout"], self.c["position_offset"])

    def forward(self, src, src_len, tgt_in, tgt_len):
        """Logits (B, T, V); masks from the lengths (True = hidden)."""
        b, s, t = src.shape[0], src.shape[1], tgt_in.shape[1]
        src_pad = torch.arange(s)[None, :] >= src_len[:, None]  # (B, S)
        tgt_pad = torch.arange(t)[None, :] >= tgt_len[:, None]  # (B, T)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # (T, T)
        enc_hidden = src_pad[:, None, :].expand(b, s, s)
        dec_hidden = tgt_pad[:, None, :] | future[None]
        cross_hidden = src_pad[:, None, :].expand(b, t, s)

        x = self.embed_tokens(src, self.src_embed, getattr(self, "src_pos", None))
        for layer in self.encoder:
            x = layer(x, enc_hidden)
        enc = self.encoder_norm(x) if self.c["pre_norm"] else x
        y = self.embed_tokens(tgt_in, self.tgt_embed, getattr(self, "tgt_pos", None))
        for layer in self.decoder:
            y = layer(y, dec_hidden, enc, cross_hidden)
        if self.c["pre_norm"]:
            y = self.decoder_norm(y)
        logits = y @ self.output.weight.t()
        return logits + self.output_bias if self.output_bias is not None else logits


# ------------------------------------------------------------ comparison

def check_batch(c, src, src_len, tgt_in, tgt_out, tgt_len):
    """The decoder reads start + y and predicts y + eos; sources end in eos
    with source_eos; padding elsewhere."""
    start, eos = c["decoder_start_id"], c["eos_id"]
    for i in range(src.shape[0]):
        n, m = int(src_len[i]), int(tgt_len[i])
        words = n - 1 if c["source_eos"] else n
        if (src[i, n:] != PAD).any() or (src[i, :words] == PAD).any():
            fail(f"source {i}: padding does not match its length {n}")
        if c["source_eos"] and src[i, n - 1] != eos:
            fail(f"source {i}: does not end in eos ({eos})")
        if tgt_in[i, 0] != start or (tgt_in[i, 1:m] != tgt_out[i, :m - 1]).any() \
                or tgt_out[i, m - 1] != eos or (tgt_out[i, m:] != -1).any() \
                or (tgt_in[i, m:] != PAD).any():
            fail(f"target {i}: tgt_in / tgt_out are not start + y / y + eos of length {m}")


def main(argv):
    if len(argv) != 2:
        print("usage: model_vs_pytorch.py DIR (params.bin and results.bin from model_fixture)",
              file=sys.stderr)
        return 2
    d = argv[1]
    try:
        params = tfm_checkpoint.read(os.path.join(d, "params.bin"))
        results = tfm_checkpoint.read(os.path.join(d, "results.bin"))
    except (tfm_checkpoint.CheckpointError, OSError) as e:
        fail(str(e))
    c = parse_config(params.config)
    if parse_config(results.config) != c:
        fail("params.bin and results.bin hold different configurations")
    torch.set_default_dtype(torch.float32)

    def res(name):
        if name not in results.tensors:
            fail(f"results.bin has no tensor {name!r}")
        return np.array(results.tensors[name].array)  # a writable copy

    src, src_len = res("src"), res("src_lengths")
    tgt_in, tgt_out, tgt_len = res("tgt_in"), res("tgt_out"), res("tgt_lengths")
    check_batch(c, src, src_len, tgt_in, tgt_out, tgt_len)

    model = Transformer(c)
    pmap = model.tfm_params()
    if set(pmap) != set(params.tensors):
        fail(f"parameter names differ: only in params.bin {sorted(set(params.tensors) - set(pmap))}, "
             f"only in the PyTorch model {sorted(set(pmap) - set(params.tensors))}")
    covered = {}
    with torch.no_grad():
        for name, (p, rows) in pmap.items():
            a = params.tensors[name].array
            if params.tensors[name].dtype != "f32":
                fail(f"{name} is {params.tensors[name].dtype}, the fixture writes f32")
            target = p if rows is None else p[rows]
            if tuple(target.shape) != a.shape:
                fail(f"{name}: params.bin shape {a.shape}, PyTorch {tuple(target.shape)}")
            target.copy_(torch.from_numpy(np.array(a)))
            covered[id(p)] = covered.get(id(p), 0) + target.numel()
    for n, p in model.named_parameters():  # every PyTorch parameter loaded, all of it
        if covered.get(id(p)) != p.numel():
            fail(f"PyTorch parameter {n} is not fully covered by params.bin")

    t = lambda a: torch.from_numpy(a).long()  # noqa: E731
    logits = model(t(src), t(src_len), t(tgt_in), t(tgt_len))
    v = c["vocab_size"]
    logits = logits.reshape(-1, v)
    targets = t(tgt_out).reshape(-1)
    loss = F.cross_entropy(logits, targets, ignore_index=-1, reduction="sum",
                           label_smoothing=c["label_smoothing"])
    log_probs = F.log_softmax(logits, dim=-1)
    nll = F.nll_loss(log_probs, targets, ignore_index=-1, reduction="sum")
    loss.backward()

    # One table: {name, tfm, torch, kind}. Each row's error and tolerance follow its kind.
    grads = {name: (p.grad if rows is None else p.grad[rows]).double().numpy()
             for name, (p, rows) in pmap.items()}
    total_norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    real = (targets >= 0).numpy()  # rows of real target positions
    ours_log_probs = res("log_probs")
    if ours_log_probs.shape[0] != real.shape[0]:
        fail(f"log_probs: tfm has {ours_log_probs.shape[0]} rows, PyTorch {real.shape[0]}")
    if np.any(ours_log_probs[~real] != 0):
        fail("log_probs: tfm's rows at the padding are not all 0")
    table = [("log_probs", ours_log_probs[real], log_probs.detach().double().numpy()[real], "max"),
             ("loss", res("loss"), np.array([loss.item()]), "scalar"),
             ("nll", res("nll"), np.array([nll.item()]), "scalar")]
    table += [(f"grad.{name}", res(f"grad.{name}"), g, "norm") for name, g in grads.items()]

    rows_out, failures = [], 0
    for name, ours, theirs, kind in table:
        ours = ours.astype(np.float64)
        if ours.shape != theirs.shape:
            fail(f"{name}: tfm shape {ours.shape}, PyTorch {theirs.shape}")
        if not np.isfinite(ours).all():
            rows_out.append((name, float("inf"), float("nan"), float("inf"), kind))
            failures += 1
            continue
        diff = ours - theirs
        if kind == "max":
            scale = float(np.abs(theirs).max())
            err, tol = float(np.abs(diff).max()), LOG_PROBS_RTOL * scale
        elif kind == "scalar":
            scale = abs(float(theirs[0]))
            err, tol = abs(float(diff[0])), LOSS_RTOL * scale
        else:
            scale = float(np.linalg.norm(theirs))
            err, tol = float(np.linalg.norm(diff)), GRAD_RTOL * scale + GRAD_FLOOR * total_norm
        share = err / tol if tol > 0 else (0.0 if err == 0 else float("inf"))
        failures += share > 1
        rows_out.append((name, err, scale, share, kind))

    print(f"model_vs_pytorch: {os.path.basename(os.path.normpath(d))}: "
          f"V {v}, D {c['d_model']}, H {c['heads']}, K {c['d_k']}, E {c['d_v']}, "
          f"N {c['encoder_layers']} + {c['decoder_layers']}, {'pre' if c['pre_norm'] else 'post'}-norm, "
          f"{c['activation']}, positions {c['position_layout']} from {c['position_offset']}, "
          f"attention by {'nn.MultiheadAttention' if isinstance(model.encoder[0].self_attn, TorchAttention) else 'hand'}; "
          f"loss {loss.item():.6f}, nll {nll.item():.6f}, gradient norm {total_norm:.6g}")
    print(f"  {'tensor':<48} {'error':>11} {'scale':>11} {'rel':>10} {'of tol':>8}  measure")
    measure = {"max": "max|d| / max|ref|", "scalar": "|d| / |ref|", "norm": "||d|| / ||ref||"}
    shown = sorted(rows_out, key=lambda r: -r[3])
    head = [r for r in rows_out if r[4] != "norm"]
    worst = [r for r in shown if r[4] == "norm"][:8]
    for name, err, scale, share, kind in head + worst + [r for r in shown if r[3] > 1 and r not in worst and r not in head]:
        rel = err / scale if scale > 0 else float("inf")
        flag = "  FAIL" if share > 1 else ""
        print(f"  {name:<48} {err:11.3e} {scale:11.3e} {rel:10.2e} {share:8.3f}  {measure[kind]}{flag}")
    if failures:
        fail(f"{failures} of {len(rows_out)} tensors outside their tolerance")
    print(f"model_vs_pytorch: ok, {len(rows_out)} tensors within tolerance "
          f"(log_probs {LOG_PROBS_RTOL:g} of max, loss {LOSS_RTOL:g}, "
          f"gradients {GRAD_RTOL:g} of their norm + {GRAD_FLOOR:g} of the total)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
