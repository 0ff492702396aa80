# The warning set every target of ours builds with (git's DEVELOPER flags).
function(fc_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wstrict-prototypes -Wold-style-definition -Wpointer-arith -Wvla
    -Wwrite-strings -Wformat-security -Wshadow -Wmissing-prototypes
    # Schema and type tables leave trailing members zero on purpose.
    -Wno-missing-field-initializers
    # snprintf into fixed buffers truncates messages on purpose.
    $<$<C_COMPILER_ID:GNU>:-Wno-format-truncation>)
  if(FC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
