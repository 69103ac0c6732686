# cmake -DINPUT=<file> -DOUTPUT=<header> -DNAME=<identifier> -P embed_text.cmake
# A header defining `inline constexpr const char NAME[]` with the file's text: data compiled in.
file(READ ${INPUT} text)
string(FIND "${text}" ")embedded\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} holds the raw-string delimiter )embedded\"")
endif()
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#pragma once\n"
                     "inline constexpr const char ${NAME}[] = R\"embedded(${text})embedded\";\n")
