# ctest package_deb: `cpack -G DEB` makes a package named gshare of this
# version that depends on glibc, holds exactly what `cmake --install` does
# under /usr (the preload in the loader's multiarch directory), and whose
# preload is stripped and needs nothing but glibc.
#   cmake -DBUILD_DIR=... -DOUT=... -DLIBDIR=lib/x86_64-linux-gnu -DVERSION=x.y.z
#         [-DSPANK_PLUGIN=lib/x86_64-linux-gnu/gshare/gshare_spank.so] -P check_package.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${status}):\n${out}${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${OUT})
run(cpack --config ${BUILD_DIR}/CPackConfig.cmake -G DEB -B ${OUT})
file(GLOB packages ${OUT}/*.deb)
list(LENGTH packages count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack made ${count} packages in ${OUT}: ${packages}")
endif()

run(dpkg-deb -f ${packages} Package Version Depends)
if(NOT out MATCHES "Package: gshare\n" OR NOT out MATCHES "Version: ${VERSION}\n"
   OR NOT out MATCHES "Depends: [^\n]*libc6 \\(>= 2\\.[0-9]+\\)")
  message(FATAL_ERROR "the package's fields:\n${out}")
endif()

run(dpkg-deb -c ${packages})
set(wanted usr/bin/gshare-sim usr/bin/gshare-top usr/${LIBDIR}/libgshare.so
    usr/share/doc/gshare/copyright usr/share/man/man1/gshare-top.1 usr/share/man/man7/gshare.7)
if(SPANK_PLUGIN)
  list(APPEND wanted usr/${SPANK_PLUGIN})
endif()
list(SORT wanted)
string(REGEX MATCHALL "\\./usr/[^\n]*[^/\n]\n" files "${out}")
list(TRANSFORM files REPLACE "^\\./(.*)\n$" "\\1")
list(SORT files)
if(NOT files STREQUAL wanted)
  message(FATAL_ERROR "the package holds:\n${out}\nwanted the files: ${wanted}")
endif()

run(dpkg-deb -x ${packages} ${OUT}/root)
set(library ${OUT}/root/usr/${LIBDIR}/libgshare.so)
run(readelf -S --wide ${library})
if(out MATCHES "\\.symtab|\\.debug_")
  message(FATAL_ERROR "the packaged libgshare.so is not stripped:\n${out}")
endif()
run(readelf -d ${library})
string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${out}")
if(NOT needed STREQUAL "Shared library: [libc.so.6];Shared library: [ld-linux-x86-64.so.2]")
  message(FATAL_ERROR "the packaged libgshare.so needs ${needed}, wanted only glibc")
endif()
file(SIZE ${library} size)
file(REMOVE_RECURSE ${OUT})
message(STATUS "${packages}: ${files}; libgshare.so ${size} bytes, needs ${needed}")
