# Every program has a man page; every option its --help lists is in it, and
# every option the page's OPTIONS section documents is one the program takes;
# man renders every page (tfm.7 too) without a warning.
source "$(dirname "$0")/common.bash"

# The options a page documents: the tags of the .TP items of its OPTIONS
# section ("\-\-max\-tokens" in roff), one per line.
documented_options() {
  awk '/^\.SH /{section = $0} section == ".SH OPTIONS" && previous == ".TP" {print} {previous = $0}' "$1" |
    grep -oE -- '\\-\\-[a-z0-9\\-]*[a-z0-9]' | sed 's/\\-/-/g' | sort -u
}

# man's own rendering, with groff's warnings on; stderr must stay empty.
render() {  # render PAGE
  if command -v man >/dev/null; then
    warnings=$(MANWIDTH=80 man --warnings -l "$1" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "$1: man -l warns: $warnings"
  else
    fail "man is not installed (make -f Makefile.data deps installs man-db)"
  fi
}

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
  render "$page"
  # The options of the program and of each of its subcommands ("tfm-tok
  # train --help", "tfm-batch info --help").
  subcommands=$("$exe" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}')
  : >"$TMP/help-options"
  for sub in "" $subcommands; do
    # shellcheck disable=SC2086
    options=$("$exe" $sub --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
    echo "$options" >>"$TMP/help-options"
    for option in $options; do
      # roff escapes '-' as '\-'; accept either spelling.
      escaped=${option//-/\\\\-}
      grep -qE -- "($option|$escaped)" "$page" || fail "$program${sub:+ $sub}: $option is in --help but not in $page"
    done
    [ -z "$sub" ] || grep -q "$sub" "$page" || fail "$program: subcommand $sub is not in $page"
  done
  # The reverse: nothing documented that the program does not take.
  documented=$(documented_options "$page")
  [ -n "$documented" ] || fail "$page: no option found in its OPTIONS section"
  for option in $documented; do
    grep -qxF -- "$option" "$TMP/help-options" ||
      fail "$page documents $option, which no --help of $program lists"
  done
done
if [ -f "$TFM_SOURCE/man/tfm.7" ]; then
  render "$TFM_SOURCE/man/tfm.7"
else
  fail "man/tfm.7 is missing"
fi

# cmake --install puts every page where man finds it.
if [ -n "${TFM_BUILD:-}" ]; then
  prefix="$TMP/prefix"
  cmake --install "$TFM_BUILD" --prefix "$prefix" >"$TMP/install.log" 2>&1 ||
    fail "cmake --install failed: $(tail -3 "$TMP/install.log")"
  for exe in "$TFM_BIN"/tfm-*; do
    program=$(basename "$exe")
    [ -x "$prefix/bin/$program" ] || fail "cmake --install did not install $program"
    [ -f "$prefix/share/man/man1/$program.1" ] || fail "cmake --install did not install $program.1"
  done
  [ -f "$prefix/share/man/man7/tfm.7" ] || fail "cmake --install did not install tfm.7"
  if command -v man >/dev/null; then
    MANPATH="$prefix/share/man" man -w tfm-train >/dev/null 2>&1 || fail "man does not find the installed tfm-train(1)"
  fi
fi
finish
