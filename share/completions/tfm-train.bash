# bash completion for tfm-train
_tfm_train() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  # tfm-train plot [-o FILE.svg] [--title TEXT] LOG
  if [ "${COMP_WORDS[1]:-}" = plot ] && [ "$COMP_CWORD" -gt 1 ]; then
    case "$prev" in
      -o|--output) mapfile -t COMPREPLY < <(compgen -f -X '!*.svg' -- "$cur"); return ;;
      --title) COMPREPLY=(); return ;;
    esac
    if [[ "$cur" == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "--output --title --help -o -h" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -X '!*.json' -- "$cur")
    fi
    return
  fi
  case "$prev" in
    -m|--vocab) mapfile -t COMPREPLY < <(compgen -f -X '!*.@(model|bin)' -- "$cur"); return ;;
    --dev) mapfile -t COMPREPLY < <(compgen -f -X '!*.tfmb' -- "$cur"); return ;;
    -o|--output) mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return ;;
    --resume) mapfile -t COMPREPLY < <(compgen -d -- "$cur"; compgen -f -X '!*.bin' -- "$cur"); return ;;
    --init) mapfile -t COMPREPLY < <(compgen -f -X '!*.bin' -- "$cur"); return ;;
    --config|--log) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --device) mapfile -t COMPREPLY < <(compgen -W "auto cpu cuda cuda:0 cuda:1" -- "$cur"); return ;;
    --preset) mapfile -t COMPREPLY < <(compgen -W "base big tiny" -- "$cur"); return ;;
    --precision) mapfile -t COMPREPLY < <(compgen -W "fp32 tf32 bf16 fp16" -- "$cur"); return ;;
    --lr-schedule) mapfile -t COMPREPLY < <(compgen -W "noam inverse-sqrt linear cosine constant" -- "$cur"); return ;;
    --learned-positions|--share-embeddings|--pre-norm)
      mapfile -t COMPREPLY < <(compgen -W "true false" -- "$cur"); return ;;
    --layers|--d-model|--d-ff|--heads|--d-k|--d-v|--dropout|--attention-dropout|--label-smoothing|\
    --max-positions|--layer-norm-eps|--lr-scale|--warmup|--max-tokens|--update-freq|--max-steps|\
    --lr|--min-lr|--decay-steps|--adam-beta1|--adam-beta2|--adam-eps|--weight-decay|\
    --max-epochs|--max-time|--seed|--clip-norm|--save-every|--save-every-steps|--keep-last|\
    --valid-every|--early-stop|--max-bad-steps|--log-every|--dist-timeout|--bucket-mb|--weights)
      COMPREPLY=(); return ;;
  esac
  # --weights F...: the numbers after it are factors, not files.
  local i=$((COMP_CWORD - 1))
  while [ "$i" -gt 0 ] && [[ "${COMP_WORDS[i]}" =~ ^[0-9.eE+-]+$ ]]; do i=$((i - 1)); done
  if [ "${COMP_WORDS[i]}" = --weights ] && [[ "$cur" != -* ]]; then COMPREPLY=(); return; fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--vocab --dev --output --resume --init --log --device --config
      --dump-config --preset --layers --d-model --d-ff --heads --d-k --d-v --dropout
      --attention-dropout --label-smoothing --learned-positions --max-positions --share-embeddings
      --pre-norm --layer-norm-eps --lr-schedule --lr-scale --lr --min-lr --warmup --decay-steps
      --adam-beta1 --adam-beta2 --adam-eps --weight-decay --max-tokens --update-freq --max-steps
      --max-epochs --max-time --seed --precision --clip-norm --save-every --save-every-steps
      --keep-last --valid-every --early-stop --max-bad-steps --log-every --dist-timeout --bucket-mb
      --weights --quiet --verbose
      --version --help -m -o -q -v -h" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -X '!*.tfmb' -- "$cur"; [ "$COMP_CWORD" -eq 1 ] && compgen -W "plot" -- "$cur")
  fi
}
complete -o filenames -F _tfm_train tfm-train
