# bash completion for tfm-tok
_tfm_tok() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    -m | --model | -o | --output | --alignments)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return ;;
    --model-type)
      mapfile -t COMPREPLY < <(compgen -W "bpe unigram" -- "$cur")
      return ;;
    --side)
      mapfile -t COMPREPLY < <(compgen -W "source target" -- "$cur")
      return ;;
    --vocab-size | --character-coverage | --max-sentences | --seed | --user-symbols | --threads | --best | --frequent | --min-count)
      return ;;
  esac
  local words="--model --decode --ids --side --threads --quiet --verbose --version --help -m -d -q -v -h"
  if [ "${COMP_WORDS[1]:-}" = train ] && [ "$COMP_CWORD" -gt 1 ]; then
    words="--output --vocab-size --model-type --character-coverage --max-sentences --seed --user-symbols --threads --quiet --verbose --help -o -q -v -h"
  elif [ "${COMP_WORDS[1]:-}" = shortlist ] && [ "$COMP_CWORD" -gt 1 ]; then
    words="--output --best --frequent --min-count --alignments --quiet --verbose --help -o -q -v -h"
  elif [ "$COMP_CWORD" -eq 1 ]; then
    words="train shortlist encode decode $words"
  fi
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur"; [ "$COMP_CWORD" -eq 1 ] && compgen -W "train shortlist encode decode" -- "$cur")
  fi
}
complete -F _tfm_tok tfm-tok
