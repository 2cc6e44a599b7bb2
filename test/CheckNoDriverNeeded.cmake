# CheckNoDriverNeeded.cmake - fails if any program or shared library the build made (BUILD_DIR's
# bin/ and lib/, the test programs included) records a link-time dependency (NEEDED) on the CUDA
# driver, libcuda.so: tcc and libtccrt must start where no driver is installed, and reach it with
# dlopen. Run with cmake -DBUILD_DIR=<dir> -P CheckNoDriverNeeded.cmake.
find_program(READELF NAMES readelf llvm-readelf-19 REQUIRED)
file(GLOB candidates ${BUILD_DIR}/bin/* ${BUILD_DIR}/lib/*.so* ${BUILD_DIR}/test/runtime/*.so
     ${BUILD_DIR}/test/runtime/fakecuda/*.so)
set(checked 0)
set(offenders "")
foreach(file IN LISTS candidates)
  if(IS_DIRECTORY ${file} OR IS_SYMLINK ${file})
    continue()
  endif()
  file(READ ${file} magic LIMIT 4 HEX)
  if(NOT magic STREQUAL "7f454c46") # not ELF
    continue()
  endif()
  execute_process(COMMAND ${READELF} -d --wide ${file} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed")
  endif()
  math(EXPR checked "${checked} + 1")
  if(dynamic MATCHES "\\(NEEDED\\)[^\n]*libcuda\\.so")
    list(APPEND offenders ${file})
  endif()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no ELF files found under ${BUILD_DIR}/bin and ${BUILD_DIR}/lib")
endif()
if(offenders)
  list(JOIN offenders "\n  " text)
  message(FATAL_ERROR "these need libcuda.so at load time (link it through dlopen instead):\n  ${text}")
endif()
message(STATUS "${checked} programs and libraries checked: none needs libcuda.so")
