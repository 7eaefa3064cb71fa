#!/usr/bin/env python3
"""What translating from Python costs over tfm-decode on the same input.

    PYTHONPATH=build/python .venv/bin/python tests/bench/python_overhead.py \\
        --bin build/cmd --tools build/tests [--model model.bin] [--lines 500] [--out python_overhead.tsv]

Without --model it makes a small random model (tests/tools/tiny_checkpoint,
d_model 256, 3 + 3 layers, eos's logit raised so that sentences end at
every length) over a 2,000-piece SentencePiece model that tfm-tok trains on
Multi30k's validation English (../shared/data). The input is the first
--lines lines of Multi30k's test_2016_flickr English.

Three times each, the fastest kept:
  decode       tfm-decode -m MODEL --detok over the pieces, as a process (its
               start and the model's loading included)
  python       tfm.Translator(MODEL) then translate(text): the same work
               from Python (tokenizing included, which tfm-decode is spared)
  translate    translate(text) alone on a loaded Translator
Then, where ctranslate2 imports (.venv) and --ct2 is not off, the same
model converted (tfm-convert --to ct2, float32) and the same pieces through
ctranslate2.Translator.translate_batch (beam --beam, batches of 32, its
length penalty --alpha), in each of its thread settings (inter_threads and
intra_threads = the threads this process may use), beside
Translator.translate on the same pieces with CTranslate2's search
(length^alpha, a sentence ended once beam hypotheses have): output tokens a
second, and tfm over CTranslate2's faster setting.
Prints a table and writes it to --out (TSV); the overhead is python over
decode, in percent.
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "multi30k" / "task1" / "raw"


def best_of(n, f):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="build/cmd", help="the programs (tfm-decode, tfm-tok)")
    p.add_argument("--tools", default="build/tests", help="tiny_checkpoint's folder")
    p.add_argument("--model", help="a checkpoint with a tokenizer (default: a small random one)")
    p.add_argument("--lines", type=int, default=500)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default="python_overhead.tsv")
    p.add_argument("--ct2", choices=["auto", "on", "off"], default="auto",
                   help="CTranslate2 beside Translator.translate (auto: where it imports)")
    p.add_argument("--alpha", type=float, default=0.6)
    a = p.parse_args()
    import tfm

    tmp = Path(tempfile.mkdtemp(prefix="tfm-python-overhead-"))
    with gzip.open(DATA / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][: a.lines]
    model = a.model
    if not model:
        with gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8") as f:
            (tmp / "val.en").write_text(f.read())
        subprocess.run([f"{a.bin}/tfm-tok", "train", "-q", "-o", tmp / "spm.model", "--vocab-size", "2000",
                        tmp / "val.en"], check=True)
        model = tmp / "model.bin"
        subprocess.run([f"{a.tools}/tiny_checkpoint", model, "--tokenizer", tmp / "spm.model", "--eos-logit", "4",
                        "d_model=256", "d_ff=1024", "heads=4", "d_k=64", "d_v=64", "encoder_layers=3",
                        "decoder_layers=3"], check=True)
    model = str(model)
    text = tmp / "src.txt"
    text.write_text("".join(line + "\n" for line in lines))
    pieces = tmp / "src.pieces"
    pieces.write_text(subprocess.run([f"{a.bin}/tfm-tok", "-q", "-m", model, text], check=True,
                                     capture_output=True, text=True).stdout)
    decode_cmd = [f"{a.bin}/tfm-decode", "-q", "-m", model, "--device", "cpu", "--detok", "--beam", str(a.beam),
                  str(pieces)]
    want = subprocess.run(decode_cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    decode = best_of(a.repeat, lambda: subprocess.run(decode_cmd, check=True, capture_output=True))
    got = []
    python = best_of(a.repeat, lambda: got.append(tfm.Translator(model, device="cpu").translate(lines, beam=a.beam)))
    assert got[-1] == want, "translate's output is not tfm-decode's"
    t = tfm.Translator(model, device="cpu")
    t.translate(lines[:1], beam=a.beam)
    translate = best_of(a.repeat, lambda: t.translate(lines, beam=a.beam))
    overhead = 100 * (python - decode) / decode
    rows = [("decode", decode), ("python", python), ("translate", translate)]
    ct2_rows = compare_ct2(a, t, model, tmp, pieces)

    threads = os.environ.get("OMP_NUM_THREADS", "all")
    print(f"{len(lines)} lines, beam {a.beam}, OMP_NUM_THREADS={threads}, best of {a.repeat}")
    print(f"{'what':<10} {'seconds':>8}")
    for name, s in rows:
        print(f"{name:<10} {s:8.3f}")
    print(f"overhead of python over decode: {overhead:+.1f}%")
    for name, value in ct2_rows:
        print(f"{name:<34} {value:10.1f}")
    if ct2_rows:
        values = dict(ct2_rows)
        best = max(values["ct2 inter_threads tok/s"], values["ct2 intra_threads tok/s"])
        print(f"Translator.translate over CTranslate2's faster setting: "
              f"{values['tfm Translator.translate tok/s'] / best:.2f}x")
    with open(a.out, "w") as f:
        f.write("what\tseconds\n" + "".join(f"{n}\t{s:.4f}\n" for n, s in rows) + f"overhead_pct\t{overhead:.2f}\n"
                + "".join(f"{n}\t{v:.1f}\n" for n, v in ct2_rows))
    return 0


def compare_ct2(a, translator, model, tmp, pieces_file):
    """Output tokens a second of Translator.translate and CTranslate2 on the same pieces."""
    if a.ct2 == "off":
        return []
    try:
        import ctranslate2
    except Exception as e:  # not installed: said, and skipped unless asked for
        if a.ct2 == "on":
            raise
        print(f"ctranslate2: not run: {type(e).__name__}: {e}")
        return []
    subprocess.run([f"{a.bin}/tfm-convert", "-q", "--to", "ct2", "-o", tmp / "ct2", model], check=True)
    sources = [line.split() for line in Path(pieces_file).read_text().splitlines()]
    threads = len(os.sched_getaffinity(0))
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])

    def tfm_run():
        # CTranslate2's search: length^alpha, and a sentence ends once beam
        # hypotheses have (its rule with a length penalty).
        out = translator.translate(sources, beam=a.beam, alpha=a.alpha, length_penalty="plain",
                                   early_stopping="beam")
        return sum(len(h) for h in out)

    rows = []
    tokens = tfm_run()
    rows.append(("tfm Translator.translate tok/s", tokens / best_of(a.repeat, tfm_run)))
    for name, inter, intra in (("inter_threads", threads, 1), ("intra_threads", 1, threads)):
        ct2 = ctranslate2.Translator(str(tmp / "ct2"), device="cpu", compute_type="float32",
                                     inter_threads=inter, intra_threads=intra)

        def ct2_run():
            out = ct2.translate_batch(sources, beam_size=a.beam, length_penalty=a.alpha, max_batch_size=32,
                                      max_decoding_length=max(len(s) for s in sources) + 50)
            return sum(len(r.hypotheses[0]) for r in out)

        tokens = ct2_run()
        rows.append((f"ct2 {name} tok/s", tokens / best_of(a.repeat, ct2_run)))
    print(f"ctranslate2 {ctranslate2.__version__}, float32, {threads} threads; tfm float32")
    return rows


if __name__ == "__main__":
    sys.exit(main())
