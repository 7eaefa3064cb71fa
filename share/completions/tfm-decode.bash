# bash completion for tfm-decode
_tfm_decode() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    -m|--model) mapfile -t COMPREPLY < <(compgen -f -X '!*.bin' -- "$cur"); return ;;
    --config|--prefix|--shortlist) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --length-penalty) mapfile -t COMPREPLY < <(compgen -W "gnmt plain" -- "$cur"); return ;;
    --early-stopping) mapfile -t COMPREPLY < <(compgen -W "bound beam never" -- "$cur"); return ;;
    --device) mapfile -t COMPREPLY < <(compgen -W "auto cpu cuda cuda:0 cuda:1" -- "$cur"); return ;;
    --precision) mapfile -t COMPREPLY < <(compgen -W "auto fp32 int8 bf16 fp16" -- "$cur"); return ;;
    --alignment) mapfile -t COMPREPLY < <(compgen -W "pieces words" -- "$cur"); return ;;
    --threads-take) mapfile -t COMPREPLY < <(compgen -W "auto batches rows" -- "$cur"); return ;;
    -b|--beam|--alpha|--max-len-a|--max-len-b|-n|--n-best|--attention-layer|--max-tokens|--batch-size|--max-input-len|\
    --sampling-topk|--sampling-topp|--temperature|--seed|--alignment-layer|--alignment-heads|--weights)
      COMPREPLY=(); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--model --weights --ids --detok --beam --alpha --length-penalty
      --max-len-a --max-len-b --early-stopping --prefix --constraints --shortlist --sampling --sampling-topk
      --sampling-topp --temperature --seed --n-best --scores --json --attention --attention-layer --alignment
      --alignment-layer --alignment-heads
      --attention-heads --max-tokens --batch-size --max-input-len --truncate --threads-take --device --precision
      --config --quiet --verbose --version --help -m -b -n -q -v -h" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_decode tfm-decode
