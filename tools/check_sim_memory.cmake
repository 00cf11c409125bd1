# ctest gshare_sim_memory_mix: runs gshare-sim --json over a trace with a
# GPU capacity (memory_mix.json) and fails unless
#   - under every policy, WAITING_JOB and only it waits to be admitted;
#   - pack's average JCT is below fifo's and fair's (its lanes run at once);
#   - pack's makespan is below fifo's, which runs one job at a time.
# It prints the admission waits and the ratios, so that they show in the CI
# log. A CMake script, like check_sim_ratios.cmake, so that CI needs nothing
# beyond cmake.
#
#   cmake -DGSHARE_SIM=path/to/gshare-sim -DTRACE=memory_mix.json
#         -DWAITING_JOB=bert-large -P check_sim_memory.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON)

include(${CMAKE_CURRENT_LIST_DIR}/run_sim_json.cmake)
run_sim_json(check_sim_memory GSHARE_SIM TRACE WAITING_JOB)

# A field of the output, or a fatal error that names it.
function(json_get out)
  string(JSON value ERROR_VARIABLE json_error GET "${output}" ${ARGN})
  if(json_error)
    message(FATAL_ERROR "gshare-sim --json has no ${ARGN}: ${json_error}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

string(JSON capacity_type ERROR_VARIABLE json_error TYPE "${output}" capacity_mib)
if(NOT capacity_type STREQUAL "NUMBER")
  message(FATAL_ERROR "${TRACE} gives no capacity_mib: memory is not modelled")
endif()

foreach(policy fifo fair srtf priority pack)
  string(JSON job_count LENGTH "${output}" policies ${policy} jobs)
  math(EXPR last "${job_count} - 1")
  set(found FALSE)
  foreach(i RANGE ${last})
    json_get(name policies ${policy} jobs ${i} name)
    json_get(wait policies ${policy} jobs ${i} admission_wait_s)
    if(name STREQUAL WAITING_JOB)
      set(found TRUE)
      if(NOT wait GREATER 0)
        message(FATAL_ERROR "${policy}: ${name} was admitted at once; it should wait")
      endif()
      message(STATUS "${policy}: ${name} waits ${wait} s for admission")
    elseif(NOT wait EQUAL 0)
      message(FATAL_ERROR "${policy}: ${name} waits ${wait} s for admission; only ${WAITING_JOB} should")
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "${TRACE} has no job named ${WAITING_JOB}")
  endif()
endforeach()

json_get(pack_to_fifo ratios pack_to_fifo)
json_get(fair_to_fifo ratios fair_to_fifo)
message(STATUS "average JCT pack/fifo = ${pack_to_fifo}, fair/fifo = ${fair_to_fifo}")
# if(LESS) compares as numbers, decimals included.
if(NOT pack_to_fifo LESS 1 OR NOT pack_to_fifo LESS fair_to_fifo)
  message(FATAL_ERROR "pack's average JCT does not beat fifo's and fair's")
endif()
json_get(pack_makespan policies pack summary makespan_s)
json_get(fifo_makespan policies fifo summary makespan_s)
if(NOT pack_makespan LESS fifo_makespan)
  message(FATAL_ERROR "pack's makespan (${pack_makespan} s) is not below fifo's "
                      "(${fifo_makespan} s): its lanes did not run at once")
endif()
message(STATUS "pack beats fifo and fair; makespan ${pack_makespan} s against fifo's ${fifo_makespan} s")
