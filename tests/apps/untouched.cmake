# The failed runs left every checkpoint file as fixtures.cmake recorded it in
# DIR/checkpoints.sha256: none written, changed, added or removed.
#   DIR  the directory of the checkpoints
include(${CMAKE_CURRENT_LIST_DIR}/manifest.cmake)
file(READ "${DIR}/checkpoints.sha256" recorded)
checkpoint_manifest(now)
if(NOT now STREQUAL recorded)
  message(FATAL_ERROR "the checkpoints changed:\nrecorded\n${recorded}now\n${now}")
endif()
string(REGEX MATCHALL "\n" n "${now}")
list(LENGTH n n)
message("${n} checkpoint files untouched")
