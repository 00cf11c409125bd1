# Shared by the gshare-sim checks (check_sim_*.cmake): fails unless every
# named variable was passed with -D, then runs `gshare-sim --json TRACE` and
# leaves its output in `output`, or fails with gshare-sim's error.
macro(run_sim_json script)
  foreach(variable ${ARGN})
    if(NOT DEFINED ${variable})
      message(FATAL_ERROR "${script}: pass -D${variable}=...")
    endif()
  endforeach()
  execute_process(
    COMMAND "${GSHARE_SIM}" --json "${TRACE}"
    OUTPUT_VARIABLE output
    ERROR_VARIABLE errors
    RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "gshare-sim failed (${status}): ${errors}")
  endif()
endmacro()
