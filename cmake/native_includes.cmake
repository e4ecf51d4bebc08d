# The include directories of the _native target (python/_native/*.cpp, the bindings): the repository
# root and csrc/ (the contract), never
# cuda/ or metal/. Headers of a platform are included path-qualified ("cuda/blas.h", "metal/blas.h"):
# with cuda/ and metal/ both on the path, bind_metal.cpp's "blas.h" was cuda/blas.h. One function,
# used by CMakeLists.txt and by tests/test_includes.py, which runs this file in script mode:
#   cmake -DGAPBENCH_ROOT=<repository> -P cmake/native_includes.cmake   (prints the dirs, one a line)
function(gapbench_native_include_dirs out root)
  set(${out} "${root}" "${root}/csrc" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  gapbench_native_include_dirs(_dirs "${GAPBENCH_ROOT}")
  foreach(_d ${_dirs})
    message("${_d}")
  endforeach()
endif()
