# Bad input raises tfm.Error (a RuntimeError) with tfm's one-line message,
# and arguments of the wrong type raise TypeError.
import pytest

import tfm


def test_error_is_a_runtime_error():
    assert issubclass(tfm.Error, RuntimeError)


def test_missing_files(data, tmp_path):
    missing = str(tmp_path / "missing.bin")
    for make in (tfm.Translator, tfm.Tokenizer, tfm.Checkpoint):
        with pytest.raises(tfm.Error, match="missing.bin") as e:
            make(missing)
        assert "\n" not in str(e.value)
    with pytest.raises(tfm.Error, match="missing.bin"):
        tfm.average([str(data.model), missing], str(tmp_path / "out.bin"))
    assert not (tmp_path / "out.bin").exists()


def test_not_a_checkpoint(data):
    with pytest.raises(tfm.Error):
        tfm.Checkpoint(str(data.text))


def test_bad_options(data):
    t = tfm.Translator(str(data.model), device="cpu")
    with pytest.raises(tfm.Error, match="n-best"):
        t.translate(["a b"], beam=2, n_best=3)
    with pytest.raises(tfm.Error, match="alpha"):
        t.translate(["a b"], alpha=-1)
    with pytest.raises(tfm.Error, match="line break"):
        t.translate(["a\nb"])
    with pytest.raises(tfm.Error, match=r"over --max-input-len 1024 .*\(line 2\)$"):
        t.translate([["▁a"], ["▁a"] * 1100])
    with pytest.raises(tfm.Error, match="whitespace"):
        t.translate([["▁a", "b c"]])
    with pytest.raises(tfm.Error, match="precision"):
        tfm.Translator(str(data.model), precision="fp64")
    with pytest.raises(tfm.Error, match="device"):
        tfm.Translator(str(data.model), device="tpu")
    with pytest.raises(tfm.Error, match="pair up"):
        t.score(["a b"], ["a", "b"])


def test_wrong_types(data):
    t = tfm.Translator(str(data.model), device="cpu")
    with pytest.raises(TypeError):
        t.translate("a single string")
    with pytest.raises(TypeError):
        t.translate([1, 2])
    with pytest.raises(TypeError):
        t.translate(["a"], beam="four")
    with pytest.raises(TypeError):
        tfm.Tokenizer(42)
    with pytest.raises(TypeError):
        tfm.metrics.bleu("hyp", "ref")
