# losses(FILE OUT): the "step":N,"loss":X pairs of a `weft train --metrics`
# file in ${DIR}, in order, as a list in OUT (JSON numbers are written in the
# shortest form that reads back exactly, so equal text is equal values).
function(losses file out)
  file(STRINGS "${DIR}/${file}" lines)
  set(values)
  foreach(line IN LISTS lines)
    string(REGEX MATCH "\"step\":[0-9]+,\"loss\":[^,]+" m "${line}")
    list(APPEND values "${m}")
  endforeach()
  set(${out} "${values}" PARENT_SCOPE)
endfunction()
