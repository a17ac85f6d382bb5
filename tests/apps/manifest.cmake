# checkpoint_manifest(VAR): one line "<sha256>  <path>" for every file under
# DIR/ck, DIR/truncated, DIR/corrupted and DIR/legacy (fixtures.cmake records it,
# untouched.cmake compares).
function(checkpoint_manifest var)
  set(manifest "")
  foreach(ck ck truncated corrupted legacy)
    file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${DIR}" "${DIR}/${ck}/*")
    if(NOT files)
      message(FATAL_ERROR "${DIR}/${ck} holds no files")
    endif()
    list(SORT files)
    foreach(f IN LISTS files)
      file(SHA256 "${DIR}/${f}" sum)
      string(APPEND manifest "${sum}  ${f}\n")
    endforeach()
  endforeach()
  set(${var} "${manifest}" PARENT_SCOPE)
endfunction()
