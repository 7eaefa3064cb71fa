# What the pipeline tests share (sourced; not a test itself): strict shell,
# the folders ctest gives (TFM_BIN: the built programs; TFM_SOURCE: the
# source tree), SHARED (../shared/data), fail(), and TMP, removed on exit.
set -euo pipefail
: "${TFM_BIN:?}" "${TFM_SOURCE:?}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # small models: see copy.sh
unset MAKEFLAGS MFLAGS MAKELEVEL              # when ctest runs under make
SHARED="$TFM_SOURCE/../shared/data"
fail() { echo "FAIL: $*" >&2; exit 1; }
# require_shared FILE: a file of ../shared/data the test reads, or one line.
require_shared() {
  [ -f "$SHARED/$1" ] || fail "$SHARED/$1 is missing (see ../shared/data/MANIFEST.md)"
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
