# Issue 19, item 7: every reader of a checkpoint applies the one
# configuration validation (checked_model_config, libcore/model/model_io.h):
# whole files (every checksum right) whose configuration is out of range or
# does not describe their tensors are refused by tfm-avgckpt as by
# tfm-decode, tfm-score -m, tfm-attnviz and tfm-train --resume, one line,
# exit 1, no output written.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
tiny() { "$TFM_TOOLS/tiny_checkpoint" "$@" || fail "tiny_checkpoint $*"; }

tiny "$TMP/good.bin" --tokenizer "$M" --step 3
tiny "$TMP/heads0.bin" --tokenizer "$M" --step 3 --raw-config "heads = 0"
tiny "$TMP/vocab5.bin" --tokenizer "$M" --step 3 --raw-config "vocab_size = 5"
tiny "$TMP/layers.bin" --tokenizer "$M" --step 3 --raw-config "layers = 100000"
tiny "$TMP/extra.bin" --tokenizer "$M" --step 3 --extra-tensor "decoder.extra"
echo "a b c" >"$TMP/src"

cases=$(cat <<'CASES'
heads0.bin|config: heads must be between 1 and 1024, got 0
vocab5.bin|tensor 'embed.weight' is (29, 32), but its configuration (vocab_size = 5
layers.bin|config: layers must be between 1 and 1024, got 100000
extra.bin|has a tensor 'decoder.extra' that its configuration's model does not have
CASES
)
while IFS='|' read -r file want; do
  c="$TMP/$file"
  for line in "tfm-avgckpt -o $TMP/avg.bin $TMP/good.bin $c" "tfm-avgckpt -o $TMP/avg.bin $c" \
      "tfm-decode -m $c $TMP/src" "tfm-score -m $c $TMP/src $TMP/src" "tfm-attnviz -m $c -o $TMP/a.html a" \
      "tfm-train --resume $c -o $TMP/run $T --max-steps 4"; do
    eval "set -- $line"
    program=$1
    shift
    run "$program" "$@"
    expect_rc 1 "$line"
    expect_one_error_line "$program" "$line"
    grep -qF "$want" "$TMP/err" || fail "$line: expected '$want': $(cat "$TMP/err")"
    for out in avg.bin a.html run/checkpoint_4.bin; do
      [ -e "$TMP/$out" ] && fail "$line: $out was written"
    done
  done
done <<<"$cases"

run tfm-avgckpt -o "$TMP/avg.bin" "$TMP/good.bin" "$TMP/good.bin"
expect_rc 0 "two good checkpoints"
finish
