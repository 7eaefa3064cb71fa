# Shared by the PyTorch references of tests/bench (model_pytorch.py,
# decode_pytorch.py): importing torch the way their callers expect, and the
# paper's sinusoidal position table.
import math

EXIT_NO_TORCH = 4


def import_torch():
    """torch, or None after printing "NO_TORCH <reason>" (then exit EXIT_NO_TORCH)."""
    try:
        import torch
        return torch
    except Exception as e:  # ImportError, or a broken install raising anything
        print(f"NO_TORCH {type(e).__name__}: {e}")
        return None


def sinusoids(torch, positions, d_model):
    """PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) = cos(...), (positions, D)."""
    pe = torch.zeros(positions, d_model)
    pos = torch.arange(positions, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe
