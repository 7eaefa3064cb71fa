# Fixtures of the python tests (ctest label `python`, tests/CMakeLists.txt):
# the module imported from the build folder (PYTHONPATH=BUILD/python), the
# programs it mirrors in $TFM_BIN and the test tools in $TFM_TOOLS, as the
# cli tests have them. The data is the cli tests' copy task
# (tests/cli/fixtures.bash): a 29-piece SentencePiece model trained by
# tfm-tok on random words, and tiny random checkpoints embedding it
# (tests/tools/tiny_checkpoint.cc), made once per test file in a second.
import os
import random
import subprocess
from pathlib import Path

import pytest

BIN = Path(os.environ["TFM_BIN"])
TOOLS = Path(os.environ["TFM_TOOLS"])


def run(program, *args, stdin=None):
    """A program's stdout (text); a non-zero exit fails the test with its stderr."""
    path = BIN / program if program.startswith("tfm-") else TOOLS / program
    p = subprocess.run([str(path), *map(str, args)], input=stdin, capture_output=True, text=True)
    assert p.returncode == 0, f"{program} {' '.join(map(str, args))}: {p.stderr}"
    return p.stdout


class Data:
    def __init__(self, root: Path):
        r = random.Random(1)
        words = "a b c d e f g h i j k l".split()
        self.root = root
        self.lines = [" ".join(r.choice(words) for _ in range(r.randint(2, 7))) for _ in range(300)]
        self.text = root / "text"
        self.text.write_text("\n".join(self.lines) + "\n")
        self.spm = root / "spm.model"
        run("tfm-tok", "train", "-q", "-o", self.spm, "--vocab-size", 29, self.text)
        # eos's logit raised (tiny_checkpoint.cc): of 40 lines about half end early
        # (some at once, empty), the rest run to their maximum length.
        self.model = root / "model.bin"
        run("tiny_checkpoint", self.model, "--tokenizer", self.spm, "--eos-logit", 1.0, "--seed", 1)

    def file(self, name, lines):
        path = self.root / name
        path.write_text("".join(line + "\n" for line in lines))
        return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return Data(tmp_path_factory.mktemp("data"))
