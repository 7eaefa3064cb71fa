#!/usr/bin/python3
# tests/bench/decode_ct2.py: CTranslate2 for tests/bench/decode. The same
# model (a tfm checkpoint converted by scripts/tfm-to-ct2 --ids, tokens named
# by their ids), the same sentences, tfm's batches (its length sort and its
# cuts by --max-tokens and --batch-size), beam search on the CPU in
# --compute-type float32 or int8, and one machine-readable line:
#
#   RESULT tokens_per_s=X seconds=X cpu_seconds=X sentences=N tokens=N threads=N ct2=VERSION compute_type=T
#          isa=ISA sgemm=BACKEND gemm_s8=BACKEND    (as CTranslate2 logs them)
#
# Lengths: with --lengths (one forced output length a line, the same within
# a batch: CTranslate2 forces lengths per call, not per sentence) every
# output has exactly that many tokens; without, each sentence ends where the
# model puts its end token, at most |x| + 50 tokens (tfm-decode's default),
# ranked by log-probability / |Y|^alpha (tfm's --length-penalty plain).
# --hyps FILE writes the best hypothesis of each sentence as ids, in input
# order. --use-vmap decodes under the model's vmap.txt (CTranslate2's
# vocabulary shortlist: a batch's candidates are the union of its source
# tokens' lists and the always-listed tokens). Timed: the searches alone (the model is loaded before). Threads:
# each batch split between --threads (intra_threads), or with --inter the
# batches submitted at once and --threads workers taking one each
# (inter_threads, one thread a batch), as tfm-decode runs a small model.
#
# Run by .venv/bin/python (make -f Makefile.data deps). When ctranslate2
# cannot be imported it prints "NO_MODULE <reason>" and exits 4.
import argparse
import os
import re
import sys
import tempfile
import time

EXIT_NO_MODULE = 4


def parse_args():
    p = argparse.ArgumentParser(description="CTranslate2 for tests/bench/decode")
    p.add_argument("--model", required=True, help="CTranslate2 model directory (tfm-to-ct2 --ids)")
    p.add_argument("--ids", required=True, help="source ids, one sentence a line")
    p.add_argument("--lengths", help="forced output lengths, one a line")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--compute-type", default="float32",
                   choices=["float32", "int8", "int8_float32", "bfloat16", "float16", "int8_bfloat16", "int8_float16"])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--batch-sizes", help="comma-separated: one run a batch size (instead of --batch-size)")
    p.add_argument("--inter", action="store_true", help="one thread a batch, --threads batches at once")
    p.add_argument("--use-vmap", action="store_true",
                   help="decode under the model directory's vmap.txt (its vocabulary shortlist)")
    p.add_argument("--hyps", help="write the hypotheses (ids) here")
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
    os.environ.setdefault("CT2_VERBOSE", "1")  # its CPU, ISA and GEMM backends, read below
    try:
        import ctranslate2
    except Exception as e:
        print(f"NO_MODULE {type(e).__name__}: {e}")
        return EXIT_NO_MODULE
    with open(args.ids) as f:
        sources = [line.split() for line in f]
    forced = None
    if args.lengths:
        with open(args.lengths) as f:
            forced = [int(line) for line in f]
        if len(forced) != len(sources):
            raise SystemExit("decode_ct2.py: --ids and --lengths differ in length")
    def plan(batch_size):
        """tfm's batches and each one's search options."""
        calls = []
        for batch in length_batches([len(s) for s in sources], args.max_tokens, batch_size):
            options = dict(beam_size=args.beam, length_penalty=args.alpha, max_batch_size=0,
                           use_vmap=args.use_vmap)
            if forced is not None:
                n = {forced[i] for i in batch}
                if len(n) != 1:
                    raise SystemExit("decode_ct2.py: a batch mixes forced lengths; CTranslate2 forces one a call")
                n = n.pop()
                options.update(min_decoding_length=n, max_decoding_length=n)
            else:
                options.update(min_decoding_length=0, max_decoding_length=max(len(sources[i]) for i in batch) + 50)
            calls.append((batch, options))
        return calls
    sizes = [int(x) for x in args.batch_sizes.split(",")] if args.batch_sizes else [args.batch_size]
    device, _, index = args.device.partition(":")

    # CTranslate2 logs what it runs on (CT2_VERBOSE) to stderr while it loads
    # the model: caught there and reported on the RESULT line.
    with tempfile.TemporaryFile() as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            inter, intra = (args.threads, 1) if args.inter else (1, args.threads)
            tr = ctranslate2.Translator(args.model, device=device, device_index=int(index or 0),
                                        compute_type=args.compute_type, intra_threads=intra,
                                        inter_threads=inter)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read().decode("utf-8", "replace")

    def logged(what):
        m = re.search(what + r":\s*(\S+)", text)
        return m.group(1) if m else "unknown"
    for batch_size in sizes:
        calls = plan(batch_size)
        if device == "cuda":  # untimed: first-call setup at this size
            batch, options = calls[-1]
            tr.translate_batch([sources[i] for i in batch], **options)
        hyps = [None] * len(sources)
        start, cpu_start = time.perf_counter(), time.process_time()
        if args.inter:  # every call queued, then the results as the workers finish them
            pending = [(batch, tr.translate_batch([sources[i] for i in batch], asynchronous=True, **options))
                       for batch, options in calls]
            for batch, results in pending:
                for i, r in zip(batch, results):
                    hyps[i] = r.result().hypotheses[0]
        else:
            for batch, options in calls:
                for i, r in zip(batch, tr.translate_batch([sources[i] for i in batch], **options)):
                    hyps[i] = r.hypotheses[0]
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        tokens = sum(len(h) for h in hyps)
        if args.hyps:
            with open(args.hyps + (f".{batch_size}" if args.batch_sizes else ""), "w") as f:
                f.write("".join(" ".join(h) + "\n" for h in hyps))
        print(f"RESULT tokens_per_s={tokens / seconds:.1f} seconds={seconds:.3f} cpu_seconds={cpu_seconds:.3f} "
              f"sentences={len(sources)} tokens={tokens} threads={args.threads} ct2={ctranslate2.__version__} "
              f"compute_type={args.compute_type} isa={logged('Selected ISA')} sgemm={logged('SGEMM backend')} "
              f"gemm_s8={logged('GEMM_S8 backend')} batch_size={batch_size} vmap={int(args.use_vmap)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
