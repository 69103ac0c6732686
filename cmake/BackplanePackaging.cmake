# Installing the SDK and packaging: the CMake package (backplaneConfig.cmake, its version file,
# the exported targets, BackplanePlugin.cmake), backplane.pc, and the Debian packages CPack makes
# (cpack -G DEB in the build folder).
#
# Install components, and the Debian package each goes to:
#   runtime, plugin_cpu      libbackplane0          libbackplane.so.0 and the cpu plugin: enough
#                                                   for a host application on any machine
#   hub                      libbackplane-hub0      the kernel hub library (OpenSSL, libarchive)
#   plugin_<name>            backplane-plugin-<name> one per accelerator plugin (cuda, rocm with
#                                                   its HIP kernel module, xpu, mps, sim with its
#                                                   topologies): each pulls in only its own
#                                                   vendor libraries, installed where wanted
#   tools                    backplane-tools        hwprobe, kernel-hub
#   dev                      libbackplane-dev       headers, CMake package, pkg-config file,
#                                                   the conformance suite library
#   torch                    (not packaged)         backplane::torch, the LibTorch bridge: a
#                                                   static library bound to the exact LibTorch it
#                                                   was compiled against, by default the torch
#                                                   wheel of a Python environment, which no
#                                                   Debian package can depend on; installed with
#                                                   `cmake --install --component torch`
#
# Included once from the top CMakeLists.txt; the work is deferred to the end of the top folder,
# when every target and install rule exists.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(BACKPLANE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/backplane)

macro(_backplane_install_package_files)
  install(EXPORT backplane-targets NAMESPACE backplane:: DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR}
          FILE backplane-targets.cmake COMPONENT dev)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/backplaneConfig.cmake.in
    ${PROJECT_BINARY_DIR}/package/backplaneConfig.cmake
    INSTALL_DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR})
  # 0.x: a minor version may break, so only the same minor is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/backplaneConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/package/backplaneConfig.cmake
                ${PROJECT_BINARY_DIR}/package/backplaneConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/BackplanePlugin.cmake
          DESTINATION ${BACKPLANE_CMAKE_INSTALL_DIR} COMPONENT dev)

  # pkg-config: relocatable, the prefix found from the .pc file's own folder.
  file(RELATIVE_PATH BACKPLANE_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
  string(REGEX REPLACE "/$" "" BACKPLANE_PC_TO_PREFIX "${BACKPLANE_PC_TO_PREFIX}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/backplane.pc.in
                 ${PROJECT_BINARY_DIR}/package/backplane.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/package/backplane.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endmacro()

macro(_backplane_debian_packages)
  set(CPACK_PACKAGE_NAME backplane)
  set(CPACK_PACKAGE_VENDOR "backplane")
  set(CPACK_PACKAGE_CONTACT "backplane maintainers <backplane@localhost>")
  set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
  set(CPACK_GENERATOR DEB)
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION libs)
  # dpkg-shlibdeps finds the Debian packages of the libraries each package links; our own
  # libraries it finds in the build tree and leaves to the explicit Depends below.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
  # As Debian ships binaries: stripped, their debug information in a <package>-dbgsym package
  # beside each (found by build id under /usr/lib/debug/.build-id). Without -g (a Release build)
  # there is nothing to split and no -dbgsym package is made.
  set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)

  get_cmake_property(components COMPONENTS)
  if("Unspecified" IN_LIST components)
    message(FATAL_ERROR
            "an install() rule has no COMPONENT, so what it installs would land in no package: "
            "give it one of runtime, hub, plugin_<name>, tools, dev or torch "
            "(cmake/BackplanePackaging.cmake says which package each goes to)")
  endif()
  list(REMOVE_ITEM components torch)
  set(CPACK_COMPONENTS_ALL ${components})
  set(same_version "(= ${PROJECT_VERSION})")
  set(runtime_package libbackplane${PROJECT_VERSION_MAJOR})
  set(hub_package libbackplane-hub${PROJECT_VERSION_MAJOR})

  # Components of one package share a group; the group names the package.
  set(CPACK_COMPONENT_RUNTIME_GROUP runtime)
  set(CPACK_COMPONENT_PLUGIN_CPU_GROUP runtime)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${runtime_package})
  set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "backplane runtime library and its cpu plugin")
  set(ldconfig_trigger ${PROJECT_BINARY_DIR}/package/triggers)
  file(WRITE ${ldconfig_trigger} "activate-noawait ldconfig\n")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${ldconfig_trigger})

  set(CPACK_COMPONENT_HUB_GROUP hub)
  set(CPACK_DEBIAN_HUB_PACKAGE_NAME ${hub_package})
  set(CPACK_DEBIAN_HUB_PACKAGE_DEPENDS "${runtime_package} ${same_version}")
  set(CPACK_DEBIAN_HUB_DESCRIPTION "backplane kernel hub library")
  set(CPACK_DEBIAN_HUB_PACKAGE_CONTROL_EXTRA ${ldconfig_trigger})

  foreach(component ${components})
    if(component MATCHES "^plugin_(.+)$" AND NOT component STREQUAL "plugin_cpu")
      set(plugin ${CMAKE_MATCH_1})
      string(TOUPPER ${component} upper)
      set(CPACK_COMPONENT_${upper}_GROUP ${component})
      set(CPACK_DEBIAN_${upper}_PACKAGE_NAME backplane-plugin-${plugin})
      set(CPACK_DEBIAN_${upper}_PACKAGE_DEPENDS "${runtime_package} ${same_version}")
      set(CPACK_DEBIAN_${upper}_DESCRIPTION "backplane ${plugin} plugin")
    endif()
  endforeach()

  set(CPACK_COMPONENT_TOOLS_GROUP tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME backplane-tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${runtime_package} ${same_version}")
  if(TARGET kernel-hub)
    string(APPEND CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS ", ${hub_package} ${same_version}")
  endif()
  set(CPACK_DEBIAN_TOOLS_DESCRIPTION "backplane tools: hwprobe, kernel-hub")

  set(CPACK_COMPONENT_DEV_GROUP dev)
  set(CPACK_DEBIAN_DEV_PACKAGE_NAME libbackplane-dev)
  set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
      "${runtime_package} ${same_version}, libdlpack-dev, nlohmann-json3-dev")
  if(TARGET backplane_hub)
    string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", ${hub_package} ${same_version}")
  endif()
  # The conformance suite is a static library linked with GoogleTest by the vendor's tests.
  set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "libgtest-dev, cmake, pkg-config")
  set(CPACK_DEBIAN_DEV_DESCRIPTION
      "backplane SDK: headers, CMake package, pkg-config file, plugin conformance suite")
  include(CPack)
endmacro()

macro(_backplane_finish_packaging)
  _backplane_install_package_files()
  _backplane_debian_packages()
endmacro()

cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _backplane_finish_packaging)
