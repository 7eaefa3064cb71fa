# bash completion for tfm-batch
_tfm_batch() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    -m|--model) mapfile -t COMPREPLY < <(compgen -f -X '!*.@(model|bin)' -- "$cur"); return ;;
    -o|--output) mapfile -t COMPREPLY < <(compgen -f -X '!*.tfmb' -- "$cur"); return ;;
    --tsv) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --max-len|--max-ratio|--max-tokens) COMPREPLY=(); return ;;
  esac
  if [ "${COMP_WORDS[1]:-}" = "info" ]; then
    if [[ "$cur" == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "--json --max-tokens --help" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -X '!*.tfmb' -- "$cur")
    fi
    return
  fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--model --output --tsv --max-len --max-ratio --max-tokens
      --strict --json --quiet --verbose --version --help -m -o -q -v -h" -- "$cur")
  elif [ "$COMP_CWORD" -eq 1 ]; then
    mapfile -t COMPREPLY < <(compgen -W "info" -- "$cur"; compgen -f -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_batch tfm-batch
