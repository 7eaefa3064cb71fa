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

# reverse_words SEED MAX_TOKENS NAME=LINES...: the reverse-words task in
# $TMP (a source line of 2 to 9 of twelve letters, its target the same
# words reversed: learned slowly enough that every update differs), for
# each NAME: NAME.src and NAME.tgt, their pieces NAME.tok.src and
# NAME.tok.tgt, and NAME.tfmb in batches of at most MAX_TOKENS tokens; and
# spm.model (29 pieces) trained on the first NAME's sources.
reverse_words() {
  local seed=$1 max_tokens=$2 split name side
  shift 2
  python3 - "$TMP" "$seed" "$@" <<'PY'
import random, sys
r = random.Random(int(sys.argv[2]))
words = "a b c d e f g h i j k l".split()
for split in sys.argv[3:]:
    name, n = split.split("=")
    src = [[r.choice(words) for _ in range(r.randint(2, 9))] for _ in range(int(n))]
    open(f"{sys.argv[1]}/{name}.src", "w").write("".join(" ".join(s) + "\n" for s in src))
    open(f"{sys.argv[1]}/{name}.tgt", "w").write("".join(" ".join(reversed(s)) + "\n" for s in src))
PY
  "$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 29 "$TMP/${1%%=*}.src"
  for split; do
    name=${split%%=*}
    for side in src tgt; do "$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/$name.$side" >"$TMP/$name.tok.$side"; done
    "$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/$name.tfmb" "$TMP/$name.tok.src" "$TMP/$name.tok.tgt" \
      --max-tokens "$max_tokens"
  done
}
