# tfm.Checkpoint (what a checkpoint holds, as the programs read it) and
# tfm.average against tfm-avgckpt: the same file, byte for byte.
import math

import tfm
from conftest import run


def test_checkpoint_values(data):
    c = tfm.Checkpoint(str(data.model))
    assert c.config["vocab_size"] == c.vocab_size == 29 and c.tokenizer_size == 29
    assert isinstance(c.config["d_model"], int) and isinstance(c.config["layer_norm_eps"], float)
    assert c.parameters == sum(math.prod(shape) for _, shape in c.tensors)
    assert c.training_state is None
    stepped = data.root / "stepped.bin"
    run("tiny_checkpoint", stepped, "--tokenizer", data.spm, "--step", 1234)
    state = tfm.Checkpoint(str(stepped)).training_state
    assert state["step"] == 1234


def test_average_as_avgckpt(data):
    paths = []
    for seed in (1, 2, 3):
        paths.append(data.root / f"ckpt{seed}.bin")
        run("tiny_checkpoint", paths[-1], "--tokenizer", data.spm, "--seed", seed)
    run("tfm-avgckpt", "-q", "-o", data.root / "avg.cli.bin", *paths)
    tensors, parameters = tfm.average([str(p) for p in paths], str(data.root / "avg.py.bin"))
    assert (data.root / "avg.py.bin").read_bytes() == (data.root / "avg.cli.bin").read_bytes()
    assert tensors == len(tfm.Checkpoint(str(paths[0])).tensors)
    assert parameters == tfm.Checkpoint(str(paths[0])).parameters
