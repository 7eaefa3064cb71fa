# What the pipeline tests share (sourced; not a test itself): strict shell,
# the folders ctest gives (TFM_BIN: the built programs; TFM_SOURCE: the
# source tree), SHARED (../shared/data), fail(), and TMP, removed on exit.
set -euo pipefail
: "${TFM_BIN:?}" "${TFM_SOURCE:?}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # small models: see copy.sh
unset MAKEFLAGS MFLAGS MAKELEVEL              # when ctest runs under make
SHARED="$TFM_SOURCE/../shared/data"
fail() { echo "FAIL: $*" >&2; exit 1; }
# A command that fails under set -e says where, instead of ending the test
# without a word (ctest then shows an empty output); under set +e (a
# failure the test expects) nothing.
trap 'tfm_status=$?; [[ $- != *e* ]] || echo "FAIL: ${0##*/}, line $LINENO: a command exited with $tfm_status" >&2' ERR
# require_shared FILE: a file of ../shared/data the test reads, or one line.
require_shared() {
  [ -f "$SHARED/$1" ] || fail "$SHARED/$1 is missing (see ../shared/data/MANIFEST.md)"
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
