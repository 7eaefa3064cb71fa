# bash completion for tfm-convert
_tfm_convert() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    --from) mapfile -t COMPREPLY < <(compgen -W "auto hf marian fairseq" -- "$cur"); return ;;
    -o|--output|--vocab|--source-spm|--target-spm) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--output --from --vocab --source-spm --target-spm --quiet --verbose
      --version --help -o -q -v -h" -- "$cur")
  else
    # INPUT: a Hugging Face directory or a Marian .npz.
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_convert tfm-convert
