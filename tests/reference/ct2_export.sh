#!/bin/bash
# Usage: ct2_export.sh TINY_CHECKPOINT VOCAB_BUNDLE
#   (TFM_BIN: the built programs; TFM_SOURCE: the source tree)
#
# tfm's native CTranslate2 writer (tfm-convert --to ct2: convert::write_ct2)
# against CTranslate2 4.8.5 (PyPI, in the
# project's .venv from make -f Makefile.data deps) and against
# scripts/tfm-to-ct2 (CTranslate2's own spec API). Models: tiny_checkpoint
# makes each variant with the SentencePiece model of a sequence-reversal
# task embedded, and tfm-train --init trains it for $STEPS steps (default
# 150) so that its distributions are peaked:
#   paper   post-norm, sinusoids, one shared embedding
#   pre     pre-norm, learned positions, separate embeddings, head size 8
#           with d_model 64 and 4 heads (CTranslate2's head_dim)
#   gelu    gelu, halves sinusoids, unscaled embeddings, an untied output
#           projection with a bias, 3 + 2 layers, sources ending in </s>
#   silu    pre-norm, silu, fairseq sinusoids from position 2, separate
#           embeddings, the decoder starting from </s>, epsilon 1e-6
#   bundle  a vocabulary bundle (its own piece table) instead of the
#           SentencePiece model, the decoder starting from <pad>, sources
#           ending in </s>; random weights (--eos-logit), not trained
# Checks (ct2_export.py): for paper and pre (and paper --ids), tfm's
# directory is byte-identical to tfm-to-ct2's, in float32, int8, int16 and
# float16; for every model CTranslate2 loads tfm's, its greedy outputs equal
# tfm-decode's on all test lines, and its forced scores (score_batch) of
# them and of the references equal the token log-probabilities of
# tfm-decode and tfm-score -m within 1e-4; int8 loads and
# translates. Errors: d_k != d_v is refused in one line naming d_v, a
# checkpoint without a tokenizer without --ids likewise, an existing
# directory without --force, and a directory of other files even with it;
# nothing is left behind.
# Without ctranslate2 in the .venv it exits 77: skipped. KEEP=1 keeps its files.
set -euo pipefail
: "${TFM_BIN:?}" "${TFM_SOURCE:?}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
tiny=$1 bundle=$2
export_() {  # export_ CHECKPOINT DIR [OPTIONS]: tfm-convert --to ct2
  local checkpoint=$1 dir=$2
  shift 2
  "$TFM_BIN/tfm-convert" -q "$checkpoint" --to ct2 -o "$dir" "$@"
}
steps=${STEPS:-150}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$TFM_SOURCE/.venv/bin/python
check=(env PYTHONDONTWRITEBYTECODE=1 "$python" "$here/ct2_export.py")
fail() { echo "ct2_export: FAIL: $*" >&2; exit 1; }
# Exits 77 (skipped) with a line of its own without ctranslate2.
"${check[@]}" ready || exit $?
TMP=$(mktemp -d /tmp/tfm-ct2-export-XXXXXX)
if [ -n "${KEEP:-}" ]; then echo "ct2_export: keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
"${check[@]}" corpus "$TMP"
"$TFM_BIN/tfm-tok" train -q -o "$TMP/spm.model" --vocab-size 64 "$TMP/train.src" "$TMP/train.tgt"
for name in train test; do
  for side in src tgt; do "$TFM_BIN/tfm-tok" -m "$TMP/spm.model" "$TMP/$name.$side" >"$TMP/$name.tok.$side"; done
done
"$TFM_BIN/tfm-batch" -q -m "$TMP/spm.model" -o "$TMP/train.tfmb" "$TMP/train.tok.src" "$TMP/train.tok.tgt" \
  --max-tokens 500

model() {  # model NAME CONFIG...: a trained variant, $TMP/NAME.bin
  local name=$1
  shift
  "$tiny" "$TMP/$name.init.bin" --tokenizer "$TMP/spm.model" d_model=64 d_ff=256 dropout=0 label_smoothing=0 "$@" ||
    fail "tiny_checkpoint ($name)"
  "$TFM_BIN/tfm-train" -q -m "$TMP/spm.model" -o "$TMP/$name" "$TMP/train.tfmb" --init "$TMP/$name.init.bin" \
    --warmup 50 --max-steps "$steps" --save-every 0 || fail "tfm-train ($name)"
  mv "$TMP/$name/checkpoint_last.bin" "$TMP/$name.bin"
}
agree() {  # agree NAME [CT2_EXPORT OPTIONS]: CTranslate2 on tfm's export of $TMP/NAME.bin
  local name=$1
  shift
  export_ "$TMP/$name.bin" "$TMP/$name.ct2" "$@" || fail "ct2_export ($name)"
  "$TFM_BIN/tfm-decode" -q -m "$TMP/$name.bin" --beam 1 --json <"$TMP/test.tok.src" >"$TMP/$name.json" ||
    fail "tfm-decode ($name)"
  "$TFM_BIN/tfm-score" -q -m "$TMP/$name.bin" -sl --json "$TMP/test.tok.src" "$TMP/test.tok.tgt" \
    >"$TMP/$name.score.json" || fail "tfm-score -m ($name)"
  "${check[@]}" agree "$TMP/$name.ct2" "$TMP/test.tok.src" "$TMP/$name.json" "$TMP/test.tok.tgt" \
    "$TMP/$name.score.json" "$name" ||
    fail "tfm and CTranslate2 disagree ($name; see above)"
}
same() {  # same NAME OPTIONS...: tfm's export and tfm-to-ct2's, with OPTIONS
  local name=$1 out=$TMP/same
  shift
  rm -rf "$out.tfm" "$out.py"
  export_ "$TMP/$name.bin" "$out.tfm" "$@" || fail "ct2_export ($name $*)"
  "$python" "$TFM_SOURCE/scripts/tfm-to-ct2" "$TMP/$name.bin" "$out.py" "$@" 2>"$TMP/convert.err" ||
    fail "tfm-to-ct2 ($name $*): $(cat "$TMP/convert.err")"
  "${check[@]}" same "$out.tfm" "$out.py" "$name $*" || fail "tfm's export differs from tfm-to-ct2's ($name $*)"
}

model paper
model pre pre_norm=true learned_positions=true share_embeddings=false
model gelu activation=gelu position_layout=halves scale_embeddings=false tie_output=false output_bias=true \
  encoder_layers=3 decoder_layers=2 source_eos=true
model silu pre_norm=true activation=silu position_layout=fairseq position_offset=2 share_embeddings=false \
  decoder_start_id=3 layer_norm_eps=1e-6
for name in paper pre; do
  for q in float32 int8 int16 float16; do same $name --quantization $q; done
done
same paper --ids
for name in paper pre gelu silu; do agree $name; done

# A bundle: the SentencePiece model on both sides, a table of the pieces
# the corpus uses (the specials first), the decoder starting from <pad>.
"${check[@]}" pieces "$TMP" >"$TMP/pieces.txt"
"$bundle" "$TMP/bundle.tfmvocab" "$TMP/spm.model" "$TMP/spm.model" "$TMP/pieces.txt" || fail "vocab_bundle"
"$tiny" "$TMP/bundle.bin" --tokenizer "$TMP/bundle.tfmvocab" --eos-logit 3 decoder_start_id=0 source_eos=true ||
  fail "tiny_checkpoint (bundle)"
agree bundle
grep -q '"decoder_start_token": "<pad>"' "$TMP/bundle.ct2/config.json" || fail "bundle: decoder_start_token is not <pad>"

for name in paper silu; do
  export_ "$TMP/$name.bin" "$TMP/$name.int8" --quantization int8 || fail "ct2_export int8 ($name)"
  "${check[@]}" loads "$TMP/$name.int8" "$TMP/test.tok.src" "$name int8" || fail "int8 ($name)"
done

refused() {  # refused WHAT PATTERN COMMAND...: exit 1, one line on stderr matching PATTERN
  local what=$1 pattern=$2 rc=0
  shift 2
  "$@" 2>"$TMP/err" || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit $rc, expected 1"
  [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q -- "$pattern" "$TMP/err" || fail "$what: stderr: $(cat "$TMP/err")"
}
mkdir "$TMP/errors"
"$tiny" "$TMP/errors/dkdv.bin" d_v=16 || fail "tiny_checkpoint (d_v 16)"
refused "d_k != d_v" "dkdv.bin: d_v = 16 cannot be represented in CTranslate2" \
  export_ "$TMP/errors/dkdv.bin" "$TMP/errors/out" --ids
"$tiny" "$TMP/errors/plain.bin" || fail "tiny_checkpoint (plain)"
refused "no tokenizer" "plain.bin: the checkpoint has no vocabulary" export_ "$TMP/errors/plain.bin" "$TMP/errors/out"
[ -z "$(ls "$TMP/errors" | grep -v '\.bin$')" ] || fail "a refused export left $(ls "$TMP/errors")"
refused "existing directory" "already exists" export_ "$TMP/paper.bin" "$TMP/paper.ct2"
export_ "$TMP/pre.bin" "$TMP/paper.ct2" --force || fail "--force"
cmp -s "$TMP/paper.ct2/model.bin" "$TMP/pre.ct2/model.bin" || fail "--force did not replace the model"
mkdir "$TMP/other" && touch "$TMP/other/notes.txt"
refused "a directory of other files" "not a CTranslate2 model directory" \
  export_ "$TMP/paper.bin" "$TMP/other" --force
[ -f "$TMP/other/notes.txt" ] || fail "a refused --force removed files"
[ -z "$(ls -d "$TMP"/*.tmp-* 2>/dev/null)" ] || fail "temporary directories left: $(ls -d "$TMP"/*.tmp-*)"
echo "ct2_export: ok (paper, pre, gelu, silu, bundle; int8; errors)"
