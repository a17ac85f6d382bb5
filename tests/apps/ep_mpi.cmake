# Expert parallelism under mpirun: `weft train --preset moe-tiny --ep 2` as
# two MPI processes gives bitwise the per-step losses of the same run as two
# rank threads (two ranks: every reduction adds two values, in either order
# the same), and its banner names the layout.
#   WEFT  the weft binary;  MPIRUN  the mpirun command, "|"-separated;  DIR  a scratch directory
set(run ${WEFT} train --preset moe-tiny --tp 1 --ep 2 --steps 4 --micro-batch 2 --eval-every 0
    --sample-tokens 0 --log-every 0)
file(REMOVE "${DIR}/ep-threads.jsonl" "${DIR}/ep-mpi.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics ep-threads.jsonl
       EXPECT "ranks 2 on the local backend: tp 1 x ep 2 x dp 1")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 2 ${run} --metrics ep-mpi.jsonl
       EXPECT "ranks 2 on the mpi backend: tp 1 x ep 2 x dp 1")
function(losses file out)
  file(STRINGS "${DIR}/${file}" lines)
  set(values)
  foreach(line IN LISTS lines)
    string(REGEX MATCH "\"step\":[0-9]+,\"loss\":[^,]+" m "${line}")
    list(APPEND values "${m}")
  endforeach()
  set(${out} "${values}" PARENT_SCOPE)
endfunction()
losses(ep-threads.jsonl a)
losses(ep-mpi.jsonl b)
message("threads: ${a}\nmpirun:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 4 OR NOT a STREQUAL b)
  message(FATAL_ERROR "the mpirun run's losses differ from the threads run's")
endif()
