# backplane_add_plugin(NAME <name> SOURCES <src>... DEVICE_TYPES <type>...
#                      [LIBRARIES <lib>...] [OUTPUT_DIRECTORY <dir>] [NO_INSTALL]
#                      [COMPONENT <install component>])
#
# Builds libbackplane-<name>.so as a plugin: hidden visibility, and a version script that
# exports only the entry symbol, so two plugins can never clash. Writes its manifest
# <name>.json next to the library and installs both into the plugin folder,
# <prefix>/lib/backplane/plugins, in the install component COMPONENT (default plugin_<name>).
# Used by the in-tree backends and, installed with the SDK (find_package(backplane)), by
# vendors' own builds: there the library goes to the current binary folder unless
# OUTPUT_DIRECTORY says otherwise, and links only backplane::plugin_sdk and LIBRARIES.
include_guard(GLOBAL)
include(GNUInstallDirs)

set(_backplane_plugin_abi_version "1.6")

function(backplane_add_plugin)
  cmake_parse_arguments(PARSE_ARGV 0 arg "NO_INSTALL" "NAME;OUTPUT_DIRECTORY;COMPONENT"
                        "SOURCES;DEVICE_TYPES;LIBRARIES")
  if(NOT arg_NAME OR NOT arg_SOURCES OR NOT arg_DEVICE_TYPES)
    message(FATAL_ERROR "backplane_add_plugin needs NAME, SOURCES and DEVICE_TYPES")
  endif()
  if(NOT arg_NAME MATCHES "^[a-z0-9_-]+$")
    message(FATAL_ERROR "backplane_add_plugin: NAME '${arg_NAME}' must be a-z, 0-9, '_' or '-'")
  endif()
  set(target backplane-${arg_NAME})
  if(arg_OUTPUT_DIRECTORY)
    set(out_dir ${arg_OUTPUT_DIRECTORY})
  elseif(DEFINED BACKPLANE_PLUGIN_BUILD_DIR)
    set(out_dir ${BACKPLANE_PLUGIN_BUILD_DIR})
  else()
    set(out_dir ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  if(DEFINED BACKPLANE_PLUGIN_INSTALL_DIR)
    set(install_dir ${BACKPLANE_PLUGIN_INSTALL_DIR})
  else()
    set(install_dir ${CMAKE_INSTALL_LIBDIR}/backplane/plugins)
  endif()

  add_library(${target} MODULE ${arg_SOURCES})
  set(version_script ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
  file(WRITE ${version_script} "{ global: backplane_plugin_get_api; local: *; };\n")
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY ${out_dir}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${version_script})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${version_script}"
                      "LINKER:--no-undefined")
  target_link_libraries(${target} PRIVATE backplane::plugin_sdk ${arg_LIBRARIES})
  # `backplane_plugins` builds every plugin of this project, for hwprobe and the tests.
  if(NOT TARGET backplane_plugins)
    add_custom_target(backplane_plugins)
  endif()
  add_dependencies(backplane_plugins ${target})

  list(TRANSFORM arg_DEVICE_TYPES PREPEND "\"" OUTPUT_VARIABLE quoted)
  list(TRANSFORM quoted APPEND "\"")
  list(JOIN quoted ", " types_json)
  file(GENERATE OUTPUT ${out_dir}/${arg_NAME}.json CONTENT
"{
  \"file_format_version\": \"1.0.0\",
  \"plugin\": {
    \"name\": \"${arg_NAME}\",
    \"library_path\": \"$<TARGET_FILE_NAME:${target}>\",
    \"abi_version\": \"${_backplane_plugin_abi_version}\",
    \"device_types\": [${types_json}]
  }
}
")
  if(NOT arg_COMPONENT)
    set(arg_COMPONENT plugin_${arg_NAME})
  endif()
  if(NOT arg_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${install_dir} COMPONENT ${arg_COMPONENT})
    install(FILES ${out_dir}/${arg_NAME}.json DESTINATION ${install_dir}
            COMPONENT ${arg_COMPONENT})
  endif()
endfunction()
