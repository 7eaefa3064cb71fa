# score_vs_sacrebleu: tfm-score against sacreBLEU 2.6.0 (PyPI, installed into
# the project's .venv by make -f Makefile.data deps) on the WMT17 en-de
# systems and perturbed copies. A missing .venv or sacreBLEU fails the test.
# Usage: score_vs_sacrebleu.sh TFM_SCORE (TFM_SOURCE: the source tree)
set -u
score=$1
: "${TFM_SOURCE:?TFM_SOURCE must name the source tree}"
python=$TFM_SOURCE/.venv/bin/python
DATA=$TFM_SOURCE/../shared/data
if ! "$python" -c 'import sacrebleu' 2>/dev/null; then
  echo "FAIL: no sacreBLEU in $TFM_SOURCE/.venv (run make -f Makefile.data deps)" >&2
  exit 1
fi
[ -d "$DATA/sacrebleu-tests/wmt17-newstest2017-en-de" ] || { echo "FAIL: no WMT17 data under $DATA" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$python" "$(dirname "$0")/score_vs_sacrebleu.py" "$score" "$DATA" "$TMP"
