# Installs BUILD_DIR into WORK_DIR/prefix, builds CONSUMER against it with
# find_package(weft) and runs it: it must end with status 0 and print its loss.
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (exit status ${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
foreach(f include/weft/nn/gpt.h include/weft/train/trainer.h lib/cmake/weft/weftConfig.cmake)
  if(NOT EXISTS "${WORK_DIR}/prefix/${f}")
    message(FATAL_ERROR "the installed tree has no ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S "${CONSUMER}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
# The consumer must end with status 0 (it checks its loss) and say so.
execute_process(COMMAND ${CMAKE_COMMAND} -E env WEFT_NUM_THREADS=1 "${WORK_DIR}/build/consumer"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer failed (exit status ${rc})")
endif()
if(NOT out MATCHES "^consumer: loss [0-9]+\\.[0-9]+ on 2 ranks\n$")
  message(FATAL_ERROR "the consumer's output is not one line 'consumer: loss <number> on 2 ranks'")
endif()
