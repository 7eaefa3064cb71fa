# Issue 38: every program's main input gives the same bytes out whichever
# way it comes in: a file; '-' fed by a pipe or redirected from the file; a
# FIFO; a gzip stream on '-' (gzip -c ... |); a .gz file; process
# substitution (/dev/fd/N). A program
# that read an input twice (to sniff the gzip magic, then to read) lost a
# pipe's first bytes, trained on compressed bytes, or hung on a FIFO.
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/fixtures.bash"
"$TFM_TOOLS/tiny_checkpoint" "$TMP/m.bin" --tokenizer "$M" || fail "tiny_checkpoint"
head -12 "$TMP/text" >"$TMP/src"
head -12 "$TMP/tok" >"$TMP/src.tok"
sed 's/ a / b /' "$TMP/src" >"$TMP/hyp"
printf '(TOP (S (NP (DT a) (NN b)) (VP (VB c))))\n(TOP (S (NP (DT d)) (VP (VB e) (NP (NN f)))))\n' >"$TMP/trees"
printf '(TOP (S (NP (XX a) (XX b)) (VP (XX c))))\n(TOP (S (NP (XX d) (XX e)) (VP (XX f))))\n' >"$TMP/test.trees"
"$TFM_BIN/tfm-train" $FAST -q -m "$M" -o "$TMP/run" "$T" --max-steps 4 --log-every 1 --log "$TMP/log.json" \
  </dev/null || fail "tfm-train for the log"

# same NAME INPUT CMD...: runs CMD with @IN@ replaced by each way of giving
# INPUT and @OUT@ by an output file; stdout and OUT must be the same bytes each
# way. 30 s a way: a program that waits on a FIFO forever fails, not hangs.
same() {
  local name=$1 input=$2 way arg out ref="" writer
  shift 2
  gzip -c "$input" >"$TMP/$name.gz"
  for way in file pipe redirect fifo gzip-pipe gzip-file substitution; do
    out="$TMP/$name.$way"
    rm -f "$TMP/fifo" && mkfifo "$TMP/fifo"
    case $way in
      file) arg=$input ;;
      pipe | redirect | gzip-pipe) arg=- ;;
      fifo) arg=$TMP/fifo ;;
      gzip-file) arg=$TMP/$name.gz ;;
      substitution)  # what <(cat INPUT) gives a program: /dev/fd/N, a pipe
        exec {fd}< <(cat "$input")
        arg=/dev/fd/$fd
        ;;
    esac
    local args=("${@//@IN@/$arg}")
    args=("${args[@]//@OUT@/$out.file}")
    writer=
    case $way in
      pipe) cat "$input" | timeout -s KILL 30 "${args[@]}" >"$out.stdout" 2>"$out.err" ;;
      redirect) timeout -s KILL 30 "${args[@]}" <"$input" >"$out.stdout" 2>"$out.err" ;;
      gzip-pipe) gzip -c "$input" | timeout -s KILL 30 "${args[@]}" >"$out.stdout" 2>"$out.err" ;;
      fifo)
        cat "$input" >"$TMP/fifo" &
        writer=$!
        timeout -s KILL 30 "${args[@]}" </dev/null >"$out.stdout" 2>"$out.err"
        ;;
      *) timeout -s KILL 30 "${args[@]}" </dev/null >"$out.stdout" 2>"$out.err" ;;
    esac
    rc=$?
    [ -n "$writer" ] && { kill "$writer" 2>/dev/null; wait "$writer" 2>/dev/null; }
    [ "$way" = substitution ] && exec {fd}<&-
    if [ "$rc" -ne 0 ]; then
      fail "$name from a $way: exit $rc$([ "$rc" -eq 137 ] && echo ' (killed after 30 s)'): $(head -c 300 "$out.err")"
      continue
    fi
    cat "$out.stdout" $([ -e "$out.file" ] && echo "$out.file") | md5sum >"$out.sum"
    [ -s "$out.stdout" ] || [ -e "$out.file" ] || fail "$name from a $way: no output"
    if [ -z "$ref" ]; then
      ref=$out
    elif ! cmp -s "$ref.sum" "$out.sum"; then
      fail "$name from a $way: not the bytes a file gives ($(head -c 200 "$out.stdout"))"
    fi
  done
}

same tok-encode "$TMP/text" "$TFM_BIN/tfm-tok" -q -m "$M" @IN@
same tok-decode "$TMP/tok" "$TFM_BIN/tfm-tok" -q -d -m "$M" @IN@
same tok-train "$TMP/text" "$TFM_BIN/tfm-tok" train -q -o @OUT@ --vocab-size 29 --threads 1 @IN@
same batch-src "$TMP/train.tok" "$TFM_BIN/tfm-batch" -q -m "$M" -o @OUT@ @IN@ "$TMP/train.tok" --max-tokens 200
same batch-tgt "$TMP/train.tok" "$TFM_BIN/tfm-batch" -q -m "$M" -o @OUT@ "$TMP/train.tok" @IN@ --max-tokens 200
same decode "$TMP/src" "$TFM_BIN/tfm-decode" -q -m "$TMP/m.bin" --device cpu @IN@
same score-hyp "$TMP/hyp" "$TFM_BIN/tfm-score" -q -i @IN@ -r "$TMP/src" --metrics bleu chrf ter
same score-ref "$TMP/src" "$TFM_BIN/tfm-score" -q -i "$TMP/hyp" -r @IN@
same score-model "$TMP/src.tok" "$TFM_BIN/tfm-score" -q -m "$TMP/m.bin" --device cpu @IN@ "$TMP/src.tok"
same parseval "$TMP/test.trees" "$TFM_BIN/tfm-score" -q -i @IN@ -r "$TMP/trees" --metrics parseval
same tree-words "$TMP/trees" "$TFM_BIN/tfm-tree" -q words @IN@
same attnviz "$TMP/src" "$TFM_BIN/tfm-attnviz" -q -m "$TMP/m.bin" --device cpu --json --input @IN@
same plot "$TMP/log.json" "$TFM_BIN/tfm-train" plot --title run -o @OUT@ @IN@
finish
