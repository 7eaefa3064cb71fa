# bash completion for tfm-score
_tfm_score() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    --tokenize|-tok) mapfile -t COMPREPLY < <(compgen -W "13a intl none char" -- "$cur"); return ;;
    -s|--smooth-method) mapfile -t COMPREPLY < <(compgen -W "exp floor add-k none" -- "$cur"); return ;;
    --smooth-value|-sv|--chrf-char-order|--chrf-word-order|--chrf-beta|-w|--width|--max-tokens) COMPREPLY=(); return ;;
    --device) mapfile -t COMPREPLY < <(compgen -W "auto cpu cuda cuda:0" -- "$cur"); return ;;
  esac
  # --metrics and -r take several words: keep offering them until an option.
  local i
  for ((i = COMP_CWORD - 1; i > 0; i--)); do
    case "${COMP_WORDS[i]}" in
      --metrics) [[ "$cur" == -* ]] || { mapfile -t COMPREPLY < <(compgen -W "bleu chrf ter parseval" -- "$cur"); return; } ;;
      -*) break ;;
    esac
  done
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--references --input --metrics --tokenize --lowercase
      --smooth-method --smooth-value --sentence-level --chrf-char-order --chrf-word-order --chrf-beta
      --chrf-whitespace --chrf-lowercase --chrf-eps-smoothing --ter-case-sensitive --ter-normalized
      --ter-no-punct --paper-bleu --score-only --width --json --model --src --tgt --ids --max-tokens
      --device --quiet --verbose --version --help -r -i -m -tok -lc -s -sv -sl -b -w -q -v -h" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_score tfm-score
