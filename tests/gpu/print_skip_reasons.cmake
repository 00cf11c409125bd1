# After ctest's summary (CTEST_CUSTOM_POST_TEST, tests/gpu/CMakeLists.txt):
# why each test that skipped in this run did, one line each.
#   cmake -DDIR=<skip_reasons directory> -P print_skip_reasons.cmake
file(GLOB reasons RELATIVE ${DIR} ${DIR}/*)
if(NOT reasons)
  return()
endif()
list(SORT reasons)
set(text "Why the skipped tests did not run:\n")
foreach(test IN LISTS reasons)
  file(STRINGS ${DIR}/${test} reason LIMIT_COUNT 1)
  string(APPEND text "  ${test}: ${reason}\n")
endforeach()
# stdout, after ctest's own lines.
execute_process(COMMAND ${CMAKE_COMMAND} -E echo_append "${text}")
