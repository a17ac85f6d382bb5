# Expert parallelism under mpirun: `weft train --preset moe-tiny` at --ep 2
# (two processes) and at --tp 2 --ep 2 (four) gives bitwise the per-step
# losses of the same runs as rank threads (every group has two ranks: each
# reduction adds two values, in either order the same), and the banners name
# the layouts.
#   WEFT  the weft binary;  MPIRUN  the mpirun command, "|"-separated;  DIR  a scratch directory
set(run ${WEFT} train --preset moe-tiny --steps 4 --micro-batch 2 --eval-every 0 --sample-tokens 0
    --log-every 0)
file(REMOVE "${DIR}/ep-threads.jsonl" "${DIR}/ep-mpi.jsonl" "${DIR}/ep4-threads.jsonl"
     "${DIR}/ep4-mpi.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --tp 1 --ep 2 --metrics ep-threads.jsonl
       EXPECT "ranks 2 on the local backend: tp 1 x ep 2 x dp 1")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 2 ${run} --tp 1 --ep 2 --metrics ep-mpi.jsonl
       EXPECT "ranks 2 on the mpi backend: tp 1 x ep 2 x dp 1")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --tp 2 --ep 2 --metrics ep4-threads.jsonl
       EXPECT "ranks 4 on the local backend: tp 2 x ep 2 x dp 1")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 4 ${run} --tp 2 --ep 2 --metrics ep4-mpi.jsonl
       EXPECT "ranks 4 on the mpi backend: tp 2 x ep 2 x dp 1")
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
foreach(run ep ep4)
  losses(${run}-threads.jsonl a)
  losses(${run}-mpi.jsonl b)
  message("${run} threads: ${a}\n${run} mpirun:  ${b}")
  list(LENGTH a n)
  if(NOT n EQUAL 4 OR NOT a STREQUAL b)
    message(FATAL_ERROR "${run}: the mpirun run's losses differ from the threads run's")
  endif()
endforeach()
