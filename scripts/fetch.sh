#!/bin/bash
# fetch.sh: one raw file of a pipeline, downloaded or taken from a local
# mirror, and checked against the checksum scripts/sources.tsv records.
#
# usage: fetch.sh PATH OUT
#   PATH         the file's line in scripts/sources.tsv (multi30k/task1/raw/train.en.gz)
#   OUT          where to put it (Makefile.data: WORK/download/PATH)
#   DATA_MIRROR  (environment) when set, OUT becomes a link to DATA_MIRROR/PATH
#                instead of a download
#   VERIFY=0     (environment) skip the checksum: for stand-in mirrors whose
#                files are laid out like the real ones but are not them
#
# OUT appears complete and checked, or not at all; an error is one line on
# stderr and exit status 1.
set -euo pipefail
die() { echo "fetch: error: $*" >&2; exit 1; }
[ $# -eq 2 ] || { echo "usage: fetch.sh PATH OUT" >&2; exit 2; }
rel=$1 out=$2
table="$(dirname "$0")/sources.tsv"
line=$(awk -F'\t' -v p="$rel" '$1 == p' "$table")
[ -n "$line" ] || die "$rel is not in $table"
IFS=$'\t' read -r _ url sum _ <<<"$line"

# check FILE WHAT: FILE's checksum is the recorded one.
check() {
  [ "${VERIFY:-1}" != 0 ] || return 0
  local algo=${sum%%:*} want=${sum#*:} have
  have=$("${algo}sum" <"$1" | cut -d' ' -f1)
  [ "$have" = "$want" ] || die "checksum mismatch: $rel $2 has $algo $have, expected $want (scripts/sources.tsv; VERIFY=0 skips the check)"
}

mkdir -p "$(dirname "$out")"
tmp="$out.part"
trap 'rm -f "$tmp"' EXIT
if [ -n "${DATA_MIRROR:-}" ]; then
  src="$DATA_MIRROR/$rel"
  [ -f "$src" ] || die "DATA_MIRROR has no $rel (no file $src)"
  check "$src" "in DATA_MIRROR ($src)"
  ln -sfn "$(realpath "$src")" "$tmp"
else
  echo "fetch: $url" >&2
  if [ -t 2 ]; then
    curl -fL --retry 3 --progress-bar -o "$tmp" "$url" || die "cannot download $url (DATA_MIRROR=DIR reads a local copy)"
  else  # curl's reason goes into the one error line
    why=$(curl -fL --retry 3 -sS -o "$tmp" "$url" 2>&1) \
      || die "cannot download $url: ${why##*curl: } (DATA_MIRROR=DIR reads a local copy)"
  fi
  check "$tmp" "downloaded from $url"
fi
mv -fT "$tmp" "$out"
