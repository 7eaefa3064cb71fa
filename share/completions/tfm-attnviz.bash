# bash completion for tfm-attnviz
_tfm_attnviz() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    -m|--model) mapfile -t COMPREPLY < <(compgen -f -X '!*.bin' -- "$cur"); return ;;
    -i|--input|--target-file|-o|--output) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --stack) mapfile -t COMPREPLY < <(compgen -W "enc dec cross" -- "$cur"); return ;;
    --view) mapfile -t COMPREPLY < <(compgen -W "paper heatmap grid" -- "$cur"); return ;;
    --device) mapfile -t COMPREPLY < <(compgen -W "auto cpu cuda cuda:0 cuda:1" -- "$cur"); return ;;
    --target|--max-sentences|--layer|--heads|--sentence|-b|--beam|--alpha|--max-len-a|--max-len-b)
      COMPREPLY=(); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--model --input --pieces --target --target-file --max-sentences
      --output --svg --json --stack --layer --heads --view --sentence --beam --alpha --max-len-a
      --max-len-b --device --quiet --verbose --version --help -m -i -o -b -q -v -h" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_attnviz tfm-attnviz
