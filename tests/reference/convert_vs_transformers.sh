#!/bin/bash
# Usage: convert_vs_transformers.sh (TFM_BIN: the built programs; TFM_SOURCE:
# the source tree)
#
# tfm-convert of Hugging Face MarianMTModel directories against transformers
# (PyPI, in the project's .venv-hf from make -f Makefile.data deps, over
# Debian's python3-torch) and CTranslate2's own converter of the same
# directories: convert_vs_transformers.py says what is compared. Fails
# without the venv (never skips). KEEP=1 keeps its files.
set -euo pipefail
: "${TFM_BIN:?}" "${TFM_SOURCE:?}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$TFM_SOURCE/.venv-hf/bin/python
fail() { echo "convert_vs_transformers: FAIL: $*" >&2; exit 1; }
"$python" -c 'import transformers, torch, ctranslate2' 2>/dev/null ||
  fail "$python cannot import transformers, torch and ctranslate2 (make -f Makefile.data deps)"
TMP=$(mktemp -d /tmp/tfm-convert-ref-XXXXXX)
if [ -n "${KEEP:-}" ]; then echo "convert_vs_transformers: keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
PYTHONDONTWRITEBYTECODE=1 "$python" "$here/convert_vs_transformers.py" "$TFM_BIN" \
  "$TFM_SOURCE/../shared/data/multi30k/task1/raw" "$TMP"
