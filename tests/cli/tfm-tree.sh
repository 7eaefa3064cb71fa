# tfm-tree: every command's output on a small treebank file, stdin, gzip
# and several files alike, the repairs on stderr, the chain into tfm-score
# --metrics parseval, bad input and bad usage.
source "$(dirname "$0")/common.bash"
P=tfm-tree

run $P --help
expect_rc 0 "--help"
grep -q "^Usage: tfm-tree" "$TMP/out" || fail "--help: no usage line"
for c in clean words linearize delinearize; do
  run $P $c --help
  expect_rc 0 "$c --help"
  grep -q "^Usage: tfm-tree $c" "$TMP/out" || fail "$c --help: $(head -3 "$TMP/out")"
done
run $P --version
expect_rc 0 "--version"

# Two treebank trees across lines (function tags, a trace, a root without a
# label), and one left with no word.
cat >"$TMP/a.mrg" <<'EOF'
( (S 
    (NP-SBJ-1 (NNP John) )
    (VP (VBZ has) 
      (NP (DT a) (NN dog) ))
    (. .) ))
( (S (NP-SBJ (-NONE- *-1) ) (VP (VB Go) (ADVP|PRT (RB away) )) (. .) )) ( (S (-NONE- *) ) )
EOF
cat >"$TMP/clean.want" <<'EOF'
(TOP (S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .)))
(TOP (S (VP (VB Go) (ADVP (RB away))) (. .)))
EOF
run $P clean "$TMP/a.mrg"
expect_rc 0 "clean"
cmp -s "$TMP/out" "$TMP/clean.want" || fail "clean: $(cat "$TMP/out")"
grep -qx "tfm-tree: 3 trees cleaned, 1 left out (no word left)" "$TMP/err" || fail "clean report: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/clean"
"$TFM_BIN/$P" clean <"$TMP/a.mrg" 2>/dev/null | cmp -s - "$TMP/clean" || fail "clean from stdin differs"
"$TFM_BIN/$P" clean - <"$TMP/a.mrg" 2>/dev/null | cmp -s - "$TMP/clean" || fail "clean - differs"
gzip -c "$TMP/a.mrg" >"$TMP/a.mrg.gz"
"$TFM_BIN/$P" clean "$TMP/a.mrg.gz" 2>/dev/null | cmp -s - "$TMP/clean" || fail "clean of gzip differs"
head -6 "$TMP/a.mrg" >"$TMP/a1.mrg"; tail -n +7 "$TMP/a.mrg" >"$TMP/a2.mrg"
"$TFM_BIN/$P" clean "$TMP/a1.mrg" "$TMP/a2.mrg" 2>/dev/null | cmp -s - "$TMP/clean" || fail "clean of two files differs"
run $P clean -q "$TMP/a.mrg"
[ -s "$TMP/err" ] && fail "-q: stderr: $(cat "$TMP/err")"

run $P words "$TMP/clean"
expect_rc 0 "words"
[ "$(cat "$TMP/out")" = "$(printf 'John has a dog .\nGo away .')" ] || fail "words: $(cat "$TMP/out")"
cp "$TMP/out" "$TMP/src"
run $P linearize "$TMP/clean"
expect_rc 0 "linearize"
[ "$(cat "$TMP/out")" = "$(printf '(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S\n(S (VP XX (ADVP XX )ADVP )VP XX )S')" ] \
  || fail "linearize: $(cat "$TMP/out")"
cp "$TMP/out" "$TMP/seq"
grep -qx "tfm-tree: 2 trees linearized" "$TMP/err" || fail "linearize report: $(cat "$TMP/err")"

# Back: the cleaned trees, every tag XX; then a sequence that needs repairs.
run $P delinearize -w "$TMP/src" "$TMP/seq"
expect_rc 0 "delinearize"
sed 's/([^ ()]* \([^ ()]*\))/(XX \1)/g' "$TMP/clean" | cmp -s - "$TMP/out" || fail "delinearize: $(cat "$TMP/out")"
grep -qx "tfm-tree: 2 trees, 0 repaired" "$TMP/err" || fail "delinearize report: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/back"
"$TFM_BIN/$P" delinearize --words "$TMP/src" <"$TMP/seq" 2>/dev/null | cmp -s - "$TMP/back" || fail "--words, stdin differ"
printf '(S (NP XX )NP (VP XX XX )NP )S )S\n(S XX XX XX XX\n' >"$TMP/bad.seq"
run $P delinearize -w "$TMP/src" "$TMP/bad.seq"
expect_rc 0 "delinearize with repairs"
[ "$(cat "$TMP/out")" = "$(printf '(TOP (S (NP (XX John)) (VP (XX has) (XX a)) (XX dog) (XX .)))\n(TOP (S (XX Go) (XX away) (XX .)))')" ] \
  || fail "repairs: $(cat "$TMP/out")"
grep -qx "tfm-tree: 2 trees, 2 repaired: 1 closing brackets dropped, 1 closing brackets added, 2 words added, 1 words dropped" \
  "$TMP/err" || fail "repairs report: $(cat "$TMP/err")"

# The chain's end: tfm-score scores the round trip 100, tags n/a.
run tfm-score -r "$TMP/clean" -i "$TMP/back" --metrics parseval -b
[ "$(cat "$TMP/out")" = "$(printf '100.00\n100.00')" ] || fail "parseval of the round trip: $(cat "$TMP/out") $(cat "$TMP/err")"

# Bad input: exit 1, one error line with FILE:LINE.
printf '(S (NN a))\n(S (NN a b))\n' >"$TMP/word.mrg"
printf '(S (NN a))\n(S\n  (NN b)\n' >"$TMP/open.mrg"
printf '(S (NN a)))\n' >"$TMP/close.mrg"
for bad in "clean $TMP/word.mrg|word.mrg:2)" "words $TMP/open.mrg|open.mrg:3)" "linearize $TMP/close.mrg|closes nothing" \
  "clean $TMP/missing|missing" "delinearize -w $TMP/missing $TMP/seq|missing" \
  "delinearize -w $TMP/clean.want $TMP/bad.seq $TMP/bad.seq|4 sequences but 2 sentences"; do
  # shellcheck disable=SC2086
  run $P ${bad%%|*}
  expect_rc 1 "'${bad%%|*}'"; expect_one_error_line $P "'${bad%%|*}'"
  grep -qF -- "${bad##*|}" "$TMP/err" || fail "'${bad%%|*}': '${bad##*|}' not in $(cat "$TMP/err")"
done
# A count mismatch writes nothing.
run $P delinearize -w "$TMP/src" "$TMP/seq" "$TMP/seq"
[ -s "$TMP/out" ] && fail "count mismatch: output written"

# Bad usage: exit 2, one error line, a pointer to --help.
for bad in "" "trim" "clean --bogus" "delinearize $TMP/seq" "words -w $TMP/src" "clean --words $TMP/src" \
  "delinearize -w -" "delinearize -w - $TMP/seq -"; do
  # shellcheck disable=SC2086
  run $P $bad
  expect_rc 2 "'$bad'"
  expect_one_error_line $P "'$bad'"
  grep -q -- "--help" "$TMP/err" || fail "'$bad': no pointer to --help"
done

bash -c "source '$TFM_SOURCE/share/completions/tfm-tree.bash'; COMP_WORDS=(tfm-tree de); COMP_CWORD=1; _tfm_tree; echo \${COMPREPLY[*]}" \
  | grep -qx delinearize || fail "completion: no delinearize"
bash -c "source '$TFM_SOURCE/share/completions/tfm-tree.bash'; COMP_WORDS=(tfm-tree delinearize --w); COMP_CWORD=2; _tfm_tree; echo \${COMPREPLY[*]}" \
  | grep -qx -- --words || fail "completion: no --words"
finish
