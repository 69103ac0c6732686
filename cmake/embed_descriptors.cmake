# cmake -DFOLDER=<dir> -DOUTPUT=<header> -P embed_descriptors.cmake
# A header with kArchitectureDescriptors: {model_type, architecture, text} of every
# <model_type>.json in FOLDER, in name order: the architecture descriptors, compiled in.
file(GLOB files LIST_DIRECTORIES false "${FOLDER}/*.json")
list(SORT files)
set(body "")
foreach(file IN LISTS files)
  get_filename_component(model_type ${file} NAME_WE)
  file(READ ${file} text)
  string(JSON architecture GET "${text}" architecture)
  string(JSON declared GET "${text}" model_type)
  if(NOT declared STREQUAL model_type)
    message(FATAL_ERROR "${file} declares model_type '${declared}'; the file is named for it")
  endif()
  # The indentation out (JSON strings hold no raw newline, so no value changes): compilers
  # need not take string literals over 65536 bytes, and the largest file is 70 KB indented.
  string(REGEX REPLACE "\n *" "" text "${text}")
  string(LENGTH "${text}" length)
  if(length GREATER 65000)
    message(FATAL_ERROR "${file} is ${length} bytes without its indentation; at most 65000 "
                        "embed as one string literal")
  endif()
  string(FIND "${text}" ")embedded\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} holds the raw-string delimiter )embedded\"")
  endif()
  string(APPEND body "    {\"${model_type}\", \"${architecture}\", R\"embedded(${text})embedded\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from ${FOLDER}; do not edit.\n#pragma once\n\n"
     "// Included by architecture_descriptor.cpp after EmbeddedDescriptor.\n\n"
     "namespace backplane::model_detail {\n"
     "inline constexpr EmbeddedDescriptor kArchitectureDescriptors[] = {\n${body}};\n"
     "}  // namespace backplane::model_detail\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
