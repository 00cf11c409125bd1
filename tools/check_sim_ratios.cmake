# ctest gshare_sim_salus_mix: runs gshare-sim --json over a trace, prints the
# average-JCT ratios to fifo so that they show in the CI log, and fails
# unless srtf's average JCT is below fifo's (what Salus reports, and what
# srtf is for). A CMake script, so that CI needs nothing beyond cmake.
#
#   cmake -DGSHARE_SIM=path/to/gshare-sim -DTRACE=trace.json -P check_sim_ratios.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON)

include(${CMAKE_CURRENT_LIST_DIR}/run_sim_json.cmake)
run_sim_json(check_sim_ratios GSHARE_SIM TRACE)

# Every ratio gshare-sim reports: fair_to_fifo, srtf_to_fifo, priority_to_fifo.
string(JSON ratio_count ERROR_VARIABLE json_error LENGTH "${output}" ratios)
if(json_error)
  message(FATAL_ERROR "gshare-sim --json gave no ratios: ${json_error}")
endif()
if(ratio_count GREATER 0)
  math(EXPR last "${ratio_count} - 1")
  foreach(i RANGE ${last})
    string(JSON name MEMBER "${output}" ratios ${i})
    string(JSON value GET "${output}" ratios ${name})
    message(STATUS "${TRACE}: average JCT ${name} = ${value}")
  endforeach()
endif()

string(JSON srtf_to_fifo ERROR_VARIABLE json_error GET "${output}" ratios srtf_to_fifo)
if(json_error)
  message(FATAL_ERROR "gshare-sim --json has no ratios.srtf_to_fifo: ${json_error}")
endif()
# if(LESS) compares as numbers, decimals included.
if(NOT srtf_to_fifo LESS 1)
  message(FATAL_ERROR "srtf's average JCT is not below fifo's: srtf/fifo = ${srtf_to_fifo}")
endif()
message(STATUS "srtf beats fifo: srtf/fifo = ${srtf_to_fifo}")
