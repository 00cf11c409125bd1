# ctest tools_version: each program's --version prints one line, its name
# and the version of project() (the one place it is written).
#   cmake -DPROGRAMS="a;b" -DVERSION=x.y.z -P check_version.cmake
foreach(program IN LISTS PROGRAMS)
  execute_process(COMMAND ${program} --version RESULT_VARIABLE status
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  get_filename_component(name ${program} NAME)
  if(NOT status EQUAL 0 OR NOT out STREQUAL "${name} ${VERSION}\n" OR NOT err STREQUAL "")
    message(FATAL_ERROR "${program} --version: status ${status}, printed '${out}' '${err}'; "
                        "wanted one line '${name} ${VERSION}'")
  endif()
  message(STATUS "${out}")
endforeach()
