# Installs the header, both libraries, a pkg-config file (tern.pc), a CMake package
# (find_package(tern)), a SwiftPM system-library package (share/tern/CTern: Package.swift
# and CTern/module.modulemap) and a Kotlin/Native definition (share/tern/tern.def, written
# at install time with the installed paths), so engines and apps can use an installed
# tern either way. On Linux the
# shared library goes in with its versioned name and the libtern.so.X and libtern.so
# symlinks (install(FILES) keeps symlinks as symlinks).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(FILES "${TERN_INCLUDE_DIR}/tern.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${TERN_STATIC_LIBRARY}" ${TERN_SHARED_LINKS} DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(PROGRAMS "${TERN_SHARED_LIBRARY}" DESTINATION "${CMAKE_INSTALL_LIBDIR}")

string(JOIN " " TERN_NATIVE_STATIC_LIBS_STRING ${TERN_NATIVE_STATIC_LIBS})
file(RELATIVE_PATH TERN_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" TERN_PC_TO_PREFIX "${TERN_PC_TO_PREFIX}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/tern.pc.in" "${PROJECT_BINARY_DIR}/tern.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/tern.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

set(_tern_config_dir "${CMAKE_INSTALL_LIBDIR}/cmake/tern")
file(RELATIVE_PATH TERN_CONFIG_TO_PREFIX "/prefix/${_tern_config_dir}" "/prefix")
string(REGEX REPLACE "/$" "" TERN_CONFIG_TO_PREFIX "${TERN_CONFIG_TO_PREFIX}")
get_filename_component(TERN_STATIC_NAME "${TERN_STATIC_LIBRARY}" NAME)
get_filename_component(TERN_SHARED_NAME "${TERN_SHARED_LIBRARY}" NAME)
if(TERN_SHARED_SONAME)
  set(TERN_SHARED_SONAME_PROPERTY "IMPORTED_SONAME \"${TERN_SHARED_SONAME}\"")
else()
  set(TERN_SHARED_SONAME_PROPERTY "IMPORTED_NO_SONAME TRUE")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/ternConfig.cmake.in"
               "${PROJECT_BINARY_DIR}/ternConfig.cmake" @ONLY)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ternConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ternConfig.cmake" "${PROJECT_BINARY_DIR}/ternConfigVersion.cmake"
        DESTINATION "${_tern_config_dir}")

# Swift: <prefix>/share/tern/CTern is a package (identity ctern) with the system library
# target CTern in CTern/; its
# module map names the installed header by a relative path.
set(_tern_swift_dir "${CMAKE_INSTALL_DATADIR}/tern/CTern")
file(RELATIVE_PATH TERN_MODULEMAP_TO_HEADER "/prefix/${_tern_swift_dir}/CTern"
     "/prefix/${CMAKE_INSTALL_INCLUDEDIR}/tern.h")
configure_file("${CMAKE_CURRENT_LIST_DIR}/swift/module.modulemap.in"
               "${PROJECT_BINARY_DIR}/swift/CTern/module.modulemap" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/swift/CTern/module.modulemap" DESTINATION "${_tern_swift_dir}/CTern")
install(FILES "${CMAKE_CURRENT_LIST_DIR}/swift/Package.swift" DESTINATION "${_tern_swift_dir}")

# Kotlin/Native: the prefix is known only when installing (cmake --install --prefix).
install(CODE "
  include(\"${CMAKE_CURRENT_LIST_DIR}/TernKotlinDef.cmake\")
  set(_def \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/tern/tern.def\")
  message(STATUS \"Installing: \${_def}\")
  tern_write_def(\"\${_def}\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}\"
                 \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\" \"${TERN_NATIVE_STATIC_LIBS}\")
")
