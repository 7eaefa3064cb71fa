# 1,000 translate calls leave the process's resident memory about flat:
# the hypotheses, their attention arrays (owned by NumPy through a capsule)
# and the libcore Translator kept between calls are all freed (VmRSS of
# /proc/self/status, after a warm-up).
import gc

import tfm


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_no_leak_over_1000_calls(data):
    t = tfm.Translator(str(data.model), device="cpu")
    batch = data.lines[:4]
    sizes = []

    def calls(n):
        for _ in range(n):
            out = t.translate(batch, beam=2, n_best=2, return_attention=True)
            sizes.append(sum(h.attention.nbytes for hyps in out for h in hyps))
        gc.collect()

    calls(100)
    before = rss_kib()
    calls(1000)
    growth = rss_kib() - before
    # Leaking only the attention arrays would grow it by sum(sizes) / 1024 KiB.
    leak_kib = sum(sizes[100:]) / 1024
    assert leak_kib > 1024, "the calls return too little to see a leak"
    assert growth < 1024, f"VmRSS grew {growth} KiB over 1,000 calls (their attention: {leak_kib:.0f} KiB)"
