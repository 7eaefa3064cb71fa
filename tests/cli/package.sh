# The Debian package (make -f Makefile.data package: CPack DEB of this build)
# installed into a scratch root with dpkg -x, never into /: every program
# runs from there (--version), every man page renders from there (man -l),
# the bash completions and share/ are where Debian looks for them; and
# cmake --install puts the same files under a prefix. Skipped (77) where
# dpkg-deb or cpack is missing.
source "$(dirname "$0")/common.bash"
: "${TFM_BUILD:?TFM_BUILD must name the build folder}"
command -v dpkg-deb >/dev/null || { echo "no dpkg-deb here: skipped"; exit 77; }
CPACK=$(dirname "$(command -v cmake)")/cpack
[ -x "$CPACK" ] || { echo "no cpack beside cmake: skipped"; exit 77; }

# The package, built into the scratch folder (the build folder is left as it is).
(cd "$TMP" && "$CPACK" --config "$TFM_BUILD/CPackConfig.cmake" -G DEB -B "$TMP/pkg") >"$TMP/cpack.log" 2>&1 ||
  { cat "$TMP/cpack.log" >&2; fail "cpack -G DEB"; finish; }
deb=$(ls "$TMP"/pkg/tfm_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { fail "cpack wrote no tfm_*.deb: $(cat "$TMP/cpack.log")"; finish; }
[ "$(dpkg-deb -f "$deb" Package)" = tfm ] || fail "package name: $(dpkg-deb -f "$deb" Package)"
version=$("$TFM_BIN/tfm-info" --version | awk '{print $3}')
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "package version $(dpkg-deb -f "$deb" Version), tfm $version"
if command -v dpkg-shlibdeps >/dev/null; then
  dpkg-deb -f "$deb" Depends | grep -q 'libc6' || fail "no Depends from dpkg-shlibdeps: $(dpkg-deb -f "$deb" Depends)"
fi

ROOT=$TMP/root
dpkg-deb -x "$deb" "$ROOT" || fail "dpkg-deb -x"
programs=()
for exe in "$TFM_BIN"/tfm-*; do [ -x "$exe" ] && programs+=("$(basename "$exe")"); done
[ "${#programs[@]}" -ge 9 ] || fail "only ${#programs[@]} programs in $TFM_BIN"
export MANWIDTH=80
for p in "${programs[@]}"; do
  bin=$ROOT/usr/bin/$p
  [ -x "$bin" ] || { fail "$p is not in the package (usr/bin)"; continue; }
  out=$("$bin" --version 2>&1) || fail "$p --version from the package: exit $?: $out"
  [[ $out == "$p tfm $version"* ]] || fail "$p --version from the package: '$out'"
  page=$ROOT/usr/share/man/man1/$p.1
  [ -f "$page" ] || page=$page.gz
  if [ ! -f "$page" ]; then
    fail "$p: no man page in the package (usr/share/man/man1/$p.1)"
  elif command -v man >/dev/null; then
    man -l "$page" >"$TMP/man" 2>"$TMP/man.err" || fail "man -l $page: $(cat "$TMP/man.err")"
    grep -q "^NAME" "$TMP/man" && grep -q "$p" "$TMP/man" || fail "man -l $page: no NAME section naming $p"
  else
    fail "man is not installed (make -f Makefile.data deps installs man-db)"
  fi
  comp=$ROOT/usr/share/bash-completion/completions/$p
  if [ -f "$comp" ]; then
    bash -c "source '$comp' && complete -p $p" >/dev/null 2>&1 || fail "$p: the completion does not load"
  else
    fail "$p: no bash completion in the package (usr/share/bash-completion/completions/$p)"
  fi
done
page=$ROOT/usr/share/man/man7/tfm.7
[ -f "$page" ] || fail "tfm.7 is not in the package"
command -v man >/dev/null && { man -l "$page" 2>/dev/null | grep -q "^PROGRESS" || fail "man -l tfm.7"; }
[ -f "$ROOT/usr/share/tfm/attnviz/page.html" ] || fail "share/attnviz/page.html is not in usr/share/tfm"
# The package holds nothing else at the top (no build paths, no tests).
extra=$(cd "$ROOT" && find . -type f | grep -v '^\./usr/\(bin/tfm-\|share/man/man[17]/\|share/bash-completion/completions/tfm-\|share/tfm/\|share/doc/\)' || true)
[ -z "$extra" ] || fail "unexpected files in the package: $extra"

# cmake --install: the same files under a prefix.
cmake --install "$TFM_BUILD" --prefix "$TMP/prefix" >/dev/null 2>"$TMP/install.err" ||
  fail "cmake --install: $(cat "$TMP/install.err")"
diff <(cd "$ROOT/usr" && find . -type f | sort) <(cd "$TMP/prefix" && find . -type f | sort) >"$TMP/diff" ||
  fail "cmake --install and the package differ: $(cat "$TMP/diff")"
"$TMP/prefix/bin/tfm-info" --version >/dev/null || fail "tfm-info from cmake --install"
finish
