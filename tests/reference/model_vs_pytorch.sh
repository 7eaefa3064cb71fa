#!/bin/bash
# Usage: model_vs_pytorch.sh MODEL_FIXTURE
#
# For each variant, model_fixture runs tfm's Transformer once (f32, CPU, no
# dropout) and writes its parameters, log-probabilities, loss sums and
# gradients; model_vs_pytorch.py rebuilds the same model from PyTorch's own
# layers and compares (tolerances in its docstring). Variants:
#   tiny      the tiny preset; attention by nn.MultiheadAttention (K = D / H)
#   row-b     Table 3 row B (d_k 16, d_v 64: H * K != D); attention by hand
#   tiny-pre  tiny with pre-norm, learned positions, separate embeddings
#   marian    the variants of Marian models (SiLU, sinusoids in halves, a logit
#             bias, 3 + 2 layers, sources ending in eos, other start/eos ids)
#   fairseq   the variants of fairseq models (GELU, fairseq's sinusoids from
#             position 2, no embedding scale, an untied output projection)
# A missing torch, numpy or zstandard fails the test: it never skips.
set -euo pipefail

fixture=${1:?usage: model_vs_pytorch.sh MODEL_FIXTURE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3-torch, python3-numpy and python3-zstandard live in the
# system Python.
python=${TFM_PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=python3

fail() { echo "model_vs_pytorch: FAIL: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/tfm-model-ref-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for variant in tiny row-b tiny-pre marian fairseq; do
  mkdir "$tmp/$variant"
  "$fixture" "$tmp/$variant" "$variant" || fail "model_fixture failed for $variant"
  "$python" "$here/model_vs_pytorch.py" "$tmp/$variant" ||
    fail "tfm and PyTorch disagree on $variant (or a Python module is missing; see above)"
  rm -rf "${tmp:?}/$variant"  # row-b's files are about 260 MB
done
echo "model_vs_pytorch: ok (tiny, row-b, tiny-pre, marian, fairseq)"
