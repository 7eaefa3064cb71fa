# bash completion for tfm-avgckpt
_tfm_avgckpt() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    --last|--zstd-level) COMPREPLY=(); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "--output --last --keep-state --zstd-level --quiet --verbose
      --version --help -o -q -v -h" -- "$cur")
  elif [[ " ${COMP_WORDS[*]} " == *" --last "* ]]; then
    mapfile -t COMPREPLY < <(compgen -d -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_avgckpt tfm-avgckpt
