# tfm_auto_option(NAME DOC OUT): the cache option NAME, AUTO (the default),
# ON or OFF in any case, described by DOC; OUT gets its value upper-cased.
# Any other value stops the configuration, naming the option.
function(tfm_auto_option name doc out)
  set(${name} AUTO CACHE STRING "${doc}")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name} must be AUTO, ON or OFF (got '${${name}}')")
  endif()
  set(${out} ${value} PARENT_SCOPE)
endfunction()
