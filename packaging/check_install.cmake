# ctest install_tree: `cmake --install` into a fresh prefix puts exactly
# the preload, the two tools, the two man pages and, where built, the Slurm plugin there, and the tools it
# installed run.
#   cmake -DBUILD_DIR=... -DPREFIX=... -DLIBDIR=lib/x86_64-linux-gnu -DVERSION=x.y.z
#         [-DSPANK_PLUGIN=lib/x86_64-linux-gnu/gshare/gshare_spank.so] -P check_install.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${status}):\n${out}")
endif()

set(wanted
  bin/gshare-sim
  bin/gshare-top
  ${LIBDIR}/libgshare.so
  share/doc/gshare/copyright
  share/man/man1/gshare-top.1
  share/man/man7/gshare.7)
# The Slurm plugin, where it was built (slurm/: needs <slurm/spank.h>).
if(SPANK_PLUGIN)
  list(APPEND wanted ${SPANK_PLUGIN})
endif()
file(GLOB_RECURSE installed RELATIVE ${PREFIX} ${PREFIX}/*)
list(SORT installed)
list(SORT wanted)
if(NOT installed STREQUAL wanted)
  string(REPLACE ";" "\n  " installed_lines "${installed}")
  string(REPLACE ";" "\n  " wanted_lines "${wanted}")
  message(FATAL_ERROR "installed:\n  ${installed_lines}\nwanted:\n  ${wanted_lines}")
endif()

foreach(program gshare-top gshare-sim)
  execute_process(COMMAND ${PREFIX}/bin/${program} --version RESULT_VARIABLE status
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR NOT out STREQUAL "${program} ${VERSION}\n")
    message(FATAL_ERROR "installed ${program} --version: ${status} '${out}' '${err}'")
  endif()
endforeach()

# The pages carry the version and no placeholder is left.
foreach(page share/man/man1/gshare-top.1 share/man/man7/gshare.7)
  file(READ ${PREFIX}/${page} text)
  if(NOT text MATCHES "\"gshare ${VERSION}\"" OR text MATCHES "@[A-Z_]+@")
    message(FATAL_ERROR "${page}: no \"gshare ${VERSION}\" in its .TH line, or a placeholder left")
  endif()
endforeach()
file(REMOVE_RECURSE ${PREFIX})
message(STATUS "installed: ${installed}")
