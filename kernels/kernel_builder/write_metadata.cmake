# cmake -DDIR=<variant folder> -DFILES=<file;...> -DNAME=<name> -DID=<op namespace>
#       -DVERSION=<int> -DLICENSE=<spdx> -DBACKEND_FILE=<the "backend" object, JSON>
#       -P write_metadata.cmake
#
# Writes DIR/metadata.json in kernel-builder's format (what kernels' Metadata.from_bytes reads)
# with a digest of FILES: {"algorithm": "sha256", "files": {"<path>": "<base64 sha256>"}}, the
# map kernels' Digest.hash_variant makes of the folder. So that both agree, whatever else is in
# DIR goes first (a library of an older rev, a stale signature of an older metadata.json); only
# __pycache__/, which the digest never covers, stays.
cmake_minimum_required(VERSION 3.25)

foreach(var DIR FILES NAME ID VERSION LICENSE BACKEND_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "write_metadata.cmake: -D${var}= is missing")
  endif()
endforeach()

# The folder is pruned below: it must be a variant folder (build/torch...), never anything else.
get_filename_component(_variant "${DIR}" NAME)
get_filename_component(_build "${DIR}" DIRECTORY)
get_filename_component(_build "${_build}" NAME)
if(NOT IS_ABSOLUTE "${DIR}" OR NOT IS_DIRECTORY "${DIR}" OR NOT _variant MATCHES "^torch"
   OR NOT _build STREQUAL "build")
  message(FATAL_ERROR "write_metadata.cmake: DIR '${DIR}' is not a variant folder build/torch*")
endif()

set(_b64 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

# Standard base64 (with = padding) of the bytes a hex string spells.
function(hex_to_base64 hex out)
  string(LENGTH "${hex}" length)
  set(result "")
  set(i 0)
  while(i LESS length)
    math(EXPR left "${length} - ${i}")
    if(left GREATER_EQUAL 6)
      set(take 6)
    else()
      set(take ${left})
    endif()
    string(SUBSTRING "${hex}" ${i} ${take} chunk)
    math(EXPR value "0x${chunk}")
    # Left-align the chunk in 24 bits; 2 hex digits (1 byte) give 2 characters, 4 give 3.
    math(EXPR value "${value} << (4 * (6 - ${take}))")
    math(EXPR chars "${take} * 2 / 3 + 1")
    if(take EQUAL 6)
      set(chars 4)
    endif()
    foreach(shift 18 12 6 0)
      if(chars GREATER 0)
        math(EXPR index "(${value} >> ${shift}) & 63")
        string(SUBSTRING "${_b64}" ${index} 1 c)
        string(APPEND result "${c}")
        math(EXPR chars "${chars} - 1")
      else()
        string(APPEND result "=")
      endif()
    endforeach()
    math(EXPR i "${i} + ${take}")
  endwhile()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(json_string value out)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

# CMake's * matches dot files too (and never . or ..; refused below all the same).
file(GLOB entries LIST_DIRECTORIES true RELATIVE ${DIR} ${DIR}/*)
foreach(entry ${entries})
  if(entry MATCHES "^\\.\\.?$" OR entry MATCHES "/" OR entry STREQUAL "metadata.json"
     OR entry STREQUAL "__pycache__")
    continue()
  endif()
  list(FIND FILES "${entry}" found)
  if(found EQUAL -1)
    message(STATUS "kernel-builder package ${NAME}: removing ${entry}, not part of it")
    file(REMOVE_RECURSE ${DIR}/${entry})
  endif()
endforeach()

set(digest "")
list(SORT FILES)
foreach(file ${FILES})
  if(NOT EXISTS ${DIR}/${file})
    message(FATAL_ERROR "kernel-builder package ${NAME}: ${DIR}/${file} is missing")
  endif()
  file(SHA256 ${DIR}/${file} hex)
  hex_to_base64(${hex} b64)
  json_string("${file}" key)
  list(APPEND digest "      ${key}: \"${b64}\"")
endforeach()
list(JOIN digest ",\n" digest)

file(READ ${BACKEND_FILE} backend)
json_string("${NAME}" name)
json_string("${ID}" id)
json_string("${LICENSE}" license)
set(metadata "{
  \"name\": ${name},
  \"id\": ${id},
  \"version\": ${VERSION},
  \"license\": ${license},
  \"backend\": ${backend},
  \"python-depends\": [],
  \"kernel-depends\": [],
  \"digest\": {
    \"algorithm\": \"sha256\",
    \"files\": {
${digest}
    }
  }
}
")
# Written beside, then renamed: a reader never sees half a file.
file(WRITE ${DIR}/metadata.json.tmp "${metadata}")
file(RENAME ${DIR}/metadata.json.tmp ${DIR}/metadata.json)
