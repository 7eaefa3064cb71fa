# bash completion for tfm-tree
_tfm_tree() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" != -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "clean words linearize delinearize" -- "$cur")
    return
  fi
  case "$prev" in
    -w|--words) mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    local words=
    [ "${COMP_WORDS[1]:-}" = delinearize ] && words="--words -w"
    mapfile -t COMPREPLY < <(compgen -W "$words --quiet --verbose --version --help -q -v -h" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _tfm_tree tfm-tree
