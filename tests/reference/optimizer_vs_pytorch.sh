#!/bin/bash
# Usage: optimizer_vs_pytorch.sh OPTIMIZER_FIXTURE
#
# tfm-train's learning-rate schedules and Adam (betas, epsilon, decoupled
# weight decay) against PyTorch's schedulers and AdamW (Debian's
# python3-torch), through optimizer_fixture, for each schedule with other
# Adam settings each time (optimizer_vs_pytorch.py says what is compared).
# A missing torch or numpy fails the test: it never skips.
set -euo pipefail

fixture=${1:?usage: optimizer_vs_pytorch.sh OPTIMIZER_FIXTURE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${TFM_PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=python3
fail() { echo "optimizer_vs_pytorch: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tfm-optim-ref-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# schedule, warm-up, decay steps, peak, floor, then the Adam settings.
while read -r kind warmup decay lr min_lr adam; do
  # shellcheck disable=SC2086
  "$fixture" lr-schedule="$kind" warmup="$warmup" decay-steps="$decay" max-steps=40 lr="$lr" min-lr="$min_lr" \
    $adam >"$tmp/$kind.json" || fail "optimizer_fixture failed for $kind"
  "$python" "$here/optimizer_vs_pytorch.py" "$tmp/$kind.json" "$kind" "$warmup" "$decay" "$lr" "$min_lr" ||
    fail "tfm and PyTorch disagree on $kind (or a Python module is missing; see above)"
done <<'CASES'
noam 8 0 0 0 adam-beta1=0.9 adam-beta2=0.98 adam-eps=1e-9
inverse-sqrt 6 0 0.01 0 adam-beta2=0.999 adam-eps=1e-8 weight-decay=0.01
linear 5 30 0.003 0.0001 adam-beta1=0.8 weight-decay=0.1
cosine 7 33 0.005 0.0002 adam-beta2=0.995 weight-decay=0.05
constant 4 0 0.002 0 adam-eps=1e-6
CASES
echo "optimizer_vs_pytorch: ok (noam, inverse-sqrt, linear, cosine, constant)"
