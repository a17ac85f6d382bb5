# Bad inputs for the CLI tests, made in DIR from the checkpoint DIR/ck that
# apps_train_short wrote: an empty and a too-short data file, an empty --save
# directory, a checkpoint with a truncated tensor file and one with a
# corrupted index; and the SHA-256 of every file of the checkpoints
# (checkpoints.sha256). The copies have the layout of an older weft, the
# checkpoint directly in its directory (DIR/legacy: an intact one).
file(WRITE "${DIR}/empty.txt" "")
file(WRITE "${DIR}/short.txt" "too short\n")
file(REMOVE_RECURSE "${DIR}/empty-ck")
file(MAKE_DIRECTORY "${DIR}/empty-ck")
file(STRINGS "${DIR}/ck/latest" latest LIMIT_COUNT 1)
foreach(bad truncated corrupted legacy)
  file(REMOVE_RECURSE "${DIR}/${bad}")
  file(COPY "${DIR}/ck/${latest}/" DESTINATION "${DIR}/${bad}")
endforeach()
execute_process(COMMAND truncate -s 4000 "${DIR}/truncated/model-rank0.safetensors"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "truncate failed")
endif()
file(READ "${DIR}/corrupted/index.json" index)
string(REPLACE "\"" "'" index "${index}")
file(WRITE "${DIR}/corrupted/index.json" "${index}")
# What the checkpoints hold now, for apps_checkpoint_untouched (untouched.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/manifest.cmake)
checkpoint_manifest(manifest)
file(WRITE "${DIR}/checkpoints.sha256" "${manifest}")
