#!/usr/bin/python3
"""tfm-train's optimizer and schedules against PyTorch's (Debian's python3-torch).

Usage: optimizer_vs_pytorch.py FIXTURE_JSON SCHEDULE WARMUP DECAY LR MIN_LR

FIXTURE_JSON is what tests/reference/optimizer_fixture printed for one
configuration. The schedule's rates: linear and cosine against PyTorch's
LinearLR (the warm-up from 1/W, and the linear decay) and CosineAnnealingLR,
each stepped as a training loop steps it, to the decay's end; constant
against LinearLR's warm-up; inverse-sqrt and noam against their formulas
(fairseq's and the paper's; PyTorch has neither). Relative error 1e-12.
The parameters: torch.optim.AdamW in float64 (betas, eps and weight decay
as tfm's kernel reads them, in f32; each update's rate rounded to f32 as
tfm's kernel takes it) from the same start with the same gradients, after
every update: relative error 1e-10 of the largest parameter.
"""
import json
import math
import sys

import numpy as np
import torch


def warmup_rates(lr, warmup):
    """lr step / W for steps 1..W: LinearLR(start 1/W, end 1) over W - 1 steps."""
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=lr)
    s = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=warmup - 1)
    out = []
    for _ in range(warmup):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step()
    return out


def decay_rates(kind, lr, min_lr, steps):
    """Steps 0..steps of the decay after the warm-up (step W is its 0)."""
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=lr)
    if kind == "cosine":
        s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=min_lr)
    else:
        s = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0, end_factor=min_lr / lr, total_iters=steps)
    out = []
    for _ in range(steps + 1):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step()
    return out


def main():
    path, kind, warmup, decay, lr, min_lr = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        float(sys.argv[5]), float(sys.argv[6])
    got = json.load(open(path))
    rates = got["lr"]
    n = len(rates)
    want = []
    for t in range(1, n + 1):
        if kind == "noam":
            want.append(32 ** -0.5 * min(t ** -0.5, t * warmup ** -1.5))
        elif kind == "inverse-sqrt":
            want.append(lr * t / warmup if t < warmup else lr * math.sqrt(warmup / t))
        else:
            want.append(None)
    if kind in ("linear", "cosine", "constant"):
        up = warmup_rates(lr, warmup)
        down = decay_rates(kind, lr, min_lr, decay - warmup) if kind != "constant" else None
        for t in range(1, n + 1):
            if t <= warmup:
                want[t - 1] = up[t - 1]
            elif kind == "constant":
                want[t - 1] = lr
            elif t <= decay:
                want[t - 1] = down[t - warmup]
            else:
                want[t - 1] = min_lr
    for t, (a, b) in enumerate(zip(rates, want), 1):
        if abs(a - b) > 1e-12 * max(abs(b), 1e-300) + 1e-18:
            sys.exit(f"optimizer_vs_pytorch: {kind}: the rate of update {t} is {a!r}, PyTorch's {b!r}")

    P = 64
    p = torch.nn.Parameter(torch.tensor([math.cos(0.11 * i) for i in range(P)], dtype=torch.float64))
    opt = torch.optim.AdamW([p], lr=0.0, betas=(got["beta1"], got["beta2"]), eps=got["eps"],
                            weight_decay=got["weight_decay"])
    worst = 0.0
    for t in range(1, n + 1):
        p.grad = torch.tensor([math.sin(0.37 * i + 1.3 * t) + 0.1 for i in range(P)], dtype=torch.float64)
        opt.param_groups[0]["lr"] = float(np.float32(rates[t - 1]))
        opt.step()
        mine = np.array(got["params"][t - 1])
        theirs = p.detach().numpy()
        worst = max(worst, float(np.max(np.abs(mine - theirs)) / np.max(np.abs(theirs))))
    if worst > 1e-10:
        sys.exit(f"optimizer_vs_pytorch: {kind}: the parameters are {worst:.3g} (relative) from AdamW's")
    print(f"optimizer_vs_pytorch: {kind}: {n} rates equal, parameters within {worst:.2g} of AdamW's")


if __name__ == "__main__":
    main()
