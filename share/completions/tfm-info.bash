# bash completion for tfm-info
_tfm_info() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  if [ "$prev" = "--device" ]; then
    mapfile -t COMPREPLY < <(compgen -W "auto cpu cuda cuda:0 cuda:1" -- "$cur")
    return
  fi
  mapfile -t COMPREPLY < <(compgen -W "--device --json --quiet --verbose --version --help -q -v -h" -- "$cur")
}
complete -F _tfm_info tfm-info
