#!/bin/bash
# Usage: foreign_readers.sh DUMP_VALUES
#
# foreign_readers.py writes numpy, torch.save, safetensors, JSON and YAML
# files with the real writers (Debian's python3-numpy, python3-torch and
# python3-yaml), and every value tfm's readers (libcore/io/) make of them,
# as dump_values prints them, must equal what Python holds; cut copies must
# be refused with exit 1 and one line. A missing module fails the test: it
# never skips.
set -euo pipefail

dump=${1:?usage: foreign_readers.sh DUMP_VALUES}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${TFM_PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=python3

fail() { echo "foreign_readers: FAIL: $*" >&2; exit 1; }

"$python" -c 'import numpy, torch, yaml' 2>/dev/null ||
  fail "$python cannot import numpy, torch and yaml; install python3-numpy, python3-torch and python3-yaml"

tmp=$(mktemp -d /tmp/tfm-foreign-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$python" "$here/foreign_readers.py" "$dump" "$tmp" || fail "tfm's readers and Python disagree (see above)"
echo "foreign_readers: ok (npz, torch.save, safetensors, JSON and YAML as Python wrote them)"
