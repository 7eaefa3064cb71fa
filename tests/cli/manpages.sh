# Every program has a man page, and every option its --help lists is in it.
source "$(dirname "$0")/common.bash"

for exe in "$TFM_BIN"/tfm-*; do
  [ -x "$exe" ] || continue
  program=$(basename "$exe")
  page="$TFM_SOURCE/man/$program.1"
  if [ ! -f "$page" ]; then
    fail "$program has no man page ($page)"
    continue
  fi
  # The page must be valid roff that man can render without warnings.
  if command -v groff >/dev/null; then
    warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
    [ -z "$warnings" ] || fail "$page: groff warns: $warnings"
  fi
  # The options of the program and of each of its subcommands ("tfm-tok
  # train --help", "tfm-batch info --help").
  subcommands=$("$exe" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}')
  for sub in "" $subcommands; do
    # shellcheck disable=SC2086
    options=$("$exe" $sub --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
    for option in $options; do
      # roff escapes '-' as '\-'; accept either spelling.
      escaped=${option//-/\\\\-}
      grep -qE -- "($option|$escaped)" "$page" || fail "$program${sub:+ $sub}: $option is in --help but not in $page"
    done
    [ -z "$sub" ] || grep -q "$sub" "$page" || fail "$program: subcommand $sub is not in $page"
  done
done
[ -f "$TFM_SOURCE/man/tfm.7" ] || fail "man/tfm.7 is missing"
finish
