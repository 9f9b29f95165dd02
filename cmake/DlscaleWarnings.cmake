# Warnings live in one INTERFACE target so that every project target gets the same set and
# third-party targets get none.
add_library(dlscale_warnings INTERFACE)
target_compile_options(dlscale_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>)
