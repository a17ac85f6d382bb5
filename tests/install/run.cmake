# Installs BUILD_DIR into WORK_DIR/prefix, builds CONSUMER against it with
# find_package(weft) and runs it: it must end with status 0 and print its loss.
file(REMOVE_RECURSE "${WORK_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
run_ok(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
foreach(f include/weft/nn/gpt.h include/weft/train/trainer.h lib/cmake/weft/weftConfig.cmake)
  if(NOT EXISTS "${WORK_DIR}/prefix/${f}")
    message(FATAL_ERROR "the installed tree has no ${f}")
  endif()
endforeach()
# Internal headers (oneDNN plumbing, kernel helpers, comm backend internals)
# stay out of the install.
foreach(f include/weft/kernels/cpu/onednn.h include/weft/kernels/impl/gemm.h
          include/weft/kernels/elementwise.h include/weft/kernels/dispatch.h
          include/weft/comm/detail/op.h include/weft/comm/detail/reduce.h)
  if(EXISTS "${WORK_DIR}/prefix/${f}")
    message(FATAL_ERROR "the installed tree has the internal header ${f}")
  endif()
endforeach()
# ... and no installed header includes one that was left out.
file(GLOB_RECURSE installed RELATIVE "${WORK_DIR}/prefix/include" "${WORK_DIR}/prefix/include/weft/*.h")
foreach(h ${installed})
  file(STRINGS "${WORK_DIR}/prefix/include/${h}" includes REGEX "^#include \"weft/")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
    if(NOT EXISTS "${WORK_DIR}/prefix/include/${inc}")
      message(FATAL_ERROR "the installed header ${h} includes ${inc}, which is not installed")
    endif()
  endforeach()
endforeach()
run_ok(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
run_ok(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
# The consumer must end with status 0 (it checks its loss) and say so, in one line.
run_ok(COMMAND ${CMAKE_COMMAND} -E env WEFT_NUM_THREADS=1 "${WORK_DIR}/build/consumer"
       EXPECT "^consumer: loss [0-9]+\\.[0-9]+ on 2 ranks\n$")
