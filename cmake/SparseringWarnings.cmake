# Warning and sanitizer flags shared by every target through the interface target sparsering_flags.
add_library(sparsering_flags INTERFACE)
target_compile_options(sparsering_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
                             -Wcast-align -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion
                             -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARSERING_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SPARSERING_WERROR}>>:-Werror=all-warnings>)
if(SPARSERING_SANITIZE)
  target_compile_options(sparsering_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(sparsering_flags INTERFACE -fsanitize=address,undefined)
endif()
if(SPARSERING_FUZZ)
  target_compile_options(sparsering_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer>)
  target_link_options(sparsering_flags INTERFACE -fsanitize=address,undefined)
endif()
