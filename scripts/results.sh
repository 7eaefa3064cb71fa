#!/bin/bash
# results.sh: the results file of a pipeline run (Makefile.data), on stdout:
# what was trained on what, how long, the scores of tfm-score on the test
# set, a few example translations beside their references, and last one
# summary line.
#
# usage: results.sh TASK DIR BIN TITLE DEV_NAME TEST_NAME EXAMPLES [--paper-bleu|--parseval]
#   DIR holds text/{train,dev,test}.{src,tgt} (and text/test.ref, a label a
#   line, for the examples), train.tfmb, train/ (tfm-train's directory and
#   log.json), avg.opts, decode.opts and test.hyp, as Makefile.data leaves them.
#   --parseval: a parsing task; the scores are EVALB's (tfm-score --metrics
#   parseval) of DIR/test.trees against DIR/text/test.trees, and DIR holds
#   delinearize.txt (tfm-tree delinearize's line on its repairs).
set -euo pipefail
[ $# -ge 7 ] || { echo "usage: results.sh TASK DIR BIN TITLE DEV_NAME TEST_NAME EXAMPLES [--paper-bleu|--parseval]" >&2; exit 2; }
task=$1 dir=$2 bin=$3 title=$4 dev_name=$5 test_name=$6 examples=$7
paper= parse=
case ${8:-} in
  --paper-bleu) paper=--paper-bleu ;;
  --parseval) parse=1 ;;
  "") ;;
  *) echo "results.sh: error: unknown option $8" >&2; exit 2 ;;
esac

lines() { wc -l <"$1" | tr -d ' '; }
# The stop record of the last run in the log, and the start record of the first.
read -r steps epochs elapsed reason params device < <(perl -MJSON::PP -ne '
  my $r = decode_json($_);
  if ($r->{event} eq "start") { $params //= $r->{parameters}; $device = $r->{device}; }
  if ($r->{event} eq "stop") { $stop = $r; }
  END {
    my $t = int($stop->{elapsed} + 0.5);
    my $hms = $t >= 3600 ? sprintf("%dh%02dm", $t / 3600, $t % 3600 / 60) : sprintf("%dm%02ds", $t / 60, $t % 60);
    (my $why = $stop->{reason}) =~ s/ /_/g;
    printf "%d %d %s %s %.1fM %s\n", $stop->{step}, $stop->{epoch}, $hms, $why, $params / 1e6, $device;
  }' "$dir/train/log.json")
config=$("$bin/tfm-train" --resume "$dir/train" --dump-config)
knob() { sed -n "s/^$1 = //p" <<<"$config"; }
info=$("$bin/tfm-batch" info "$dir/train.tfmb")
field() { sed -n "s/^$1: *//p" <<<"$info"; }
vocab=$(field vocabulary | sed 's/.*(\([0-9]*\) pieces)/\1/')
max_tokens=$(knob max-tokens)
[ "$max_tokens" != 0 ] || max_tokens=$(field max_tokens | cut -d' ' -f1)

echo "$title"
echo "data:     $(lines "$dir/text/train.src") training pairs ($(field pairs) after tfm-batch's filters), dev $(lines "$dir/text/dev.src") lines ($dev_name), test $(lines "$dir/text/test.src") lines ($test_name)"
echo "model:    $params parameters: $(knob layers) layers, d_model $(knob d-model), d_ff $(knob d-ff), $(knob heads) heads, dropout $(knob dropout); $vocab shared pieces"
# tfm-avgckpt's first line: "tfm-avgckpt: the newest N of DIR: FILE..."; a
# checkpoint_best.bin whose update has no numbered file among them is "best".
averaged=$(head -n 1 "$dir/avg.txt" | grep -o 'checkpoint_[0-9a-z]*\.bin' | sed 's/checkpoint_\(.*\)\.bin/\1/' |
  paste -sd' ' | sed 's/ /, /g')
echo "training: $steps updates (epoch $epochs) in $elapsed on $device (${reason//_/ }), batches of <= $max_tokens tokens a side, $(knob update-freq) an update"
echo "averaged: the checkpoints of updates $averaged"
echo "decoding: $(cat "$dir/decode.opts")"
if [ -n "$parse" ]; then
  echo "trees:    tfm-tree delinearize: $(sed -n 's/^tfm-tree: //p' "$dir/delinearize.txt")"
  echo
  scores=$("$bin/tfm-score" -r "$dir/text/test.trees" -i "$dir/test.trees" --metrics parseval)
  # " = F1 (P = .. R = .. CM = .. TA = .. sent = N error = E skip = S)" of the two summaries.
  f1() { sed -n "s/^ *PARSEVAL|[^ ]*|len:$1|[^ ]* = \\([0-9.]*\\) .*/\\1/p" <<<"$scores"; }
  sent() { sed -n "s/^ *PARSEVAL|[^ ]*|len:$1|.* sent = \\([0-9]*\\) .*/\\1/p" <<<"$scores"; }
  errors=$(sed -n 's/^ *PARSEVAL|[^ ]*|len:all|.* error = \([0-9]*\) skip = \([0-9]*\).*/\1 \2/p' <<<"$scores")
  ref_file=$dir/text/test.trees hyp_file=$dir/test.trees
else
  echo
  scores=$("$bin/tfm-score" -r "$dir/text/test.tgt" -i "$dir/test.hyp" --metrics bleu chrf $paper)
  bleu=$(sed -n 's/^ *BLEU|[^=]* = \([0-9.]*\) .*/\1/p' <<<"$scores")
  paper_bleu=$(sed -n 's/^ *BLEU-paper[^=]* = \([0-9.]*\).*/\1/p' <<<"$scores")
  ref_file=$dir/text/test.tgt hyp_file=$dir/test.hyp
fi
echo "$scores"

if [ "$examples" -gt 0 ]; then
  echo
  echo "examples (source, reference, tfm):"
  # Lines of 8 to 20 source words, spread evenly over the test set.
  perl -CSD -e '
    my ($n, $src, $ref, $hyp, $lab) = @ARGV;
    sub slurp { open(my $f, "<", $_[0]) or return (); my @l = <$f>; chomp @l; @l }
    my @s = slurp($src); my @r = slurp($ref); my @h = slurp($hyp); my @l = slurp($lab);
    my @ok = grep { my $w = () = $s[$_] =~ /\S+/g; $w >= 8 && $w <= 20 } 0 .. $#s;
    @ok = (0 .. $#s) unless @ok;
    $n = @ok if $n > @ok;
    for my $k (0 .. $n - 1) {
      my $i = $ok[int(($k + 0.5) * @ok / $n)];
      printf "\n  %s\n  source:    %s\n  reference: %s\n  tfm:       %s\n", $l[$i] // "line " . ($i + 1), $s[$i], $r[$i], $h[$i];
    }' "$examples" "$dir/text/test.src" "$ref_file" "$hyp_file" "$dir/text/test.ref"
fi
echo
if [ -n "$parse" ]; then
  read -r n_errors n_skipped <<<"$errors"
  echo "$task: F1 $(f1 all) on $test_name ($(sent all) sentences; $(f1 '<=40') on the $(sent '<=40') of <= 40 words)$(
    [ "$n_errors$n_skipped" = 00 ] || echo ", $n_errors error and $n_skipped skipped sentences") | $steps updates in $elapsed on $device | $dir/results.txt, curves in $dir/curve.svg"
else
  echo "$task: BLEU $bleu on $test_name ($(lines "$dir/test.hyp") lines)${paper_bleu:+, paper-style BLEU $paper_bleu} | $steps updates in $elapsed on $device | $dir/results.txt, curves in $dir/curve.svg"
fi
