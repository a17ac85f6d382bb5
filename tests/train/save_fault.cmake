# A rank exits while the job saves (mpi_save_fault_main.cpp): the job ends by
# itself with a failure within WITHIN seconds (expect_failure.cmake), DIR/latest
# still names the last complete checkpoint, and `weft checkpoint verify DIR`
# finds it intact.
file(REMOVE_RECURSE "${DIR}")
set(EXPECT "rank 1 exits while saving")
include(${CMAKE_CURRENT_LIST_DIR}/../support/expect_failure.cmake)
file(READ "${DIR}/latest" latest)
string(STRIP "${latest}" latest)
if(NOT latest STREQUAL "step-000002")
  message(FATAL_ERROR "${DIR}/latest names '${latest}', not the complete step-000002")
endif()
execute_process(COMMAND ${WEFT} checkpoint verify ${DIR} RESULT_VARIABLE vrc OUTPUT_VARIABLE vout
                ERROR_VARIABLE vout)
message("${vout}")
if(NOT vrc EQUAL 0 OR NOT vout MATCHES "ok +index.json")
  message(FATAL_ERROR "the last complete checkpoint does not verify (exit status ${vrc})")
endif()
message("latest still names step-000002, which verifies")
