# FindHwloc: locates hwloc 2.x through pkg-config when present, else by path. No downloads.
# Provides Hwloc::hwloc, Hwloc_FOUND, Hwloc_VERSION.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_HWLOC QUIET hwloc)
endif()
find_path(Hwloc_INCLUDE_DIR hwloc.h HINTS ${HWLOC_ROOT} $ENV{HWLOC_ROOT} ${PC_HWLOC_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(Hwloc_LIBRARY NAMES hwloc HINTS ${HWLOC_ROOT} $ENV{HWLOC_ROOT} ${PC_HWLOC_LIBRARY_DIRS} PATH_SUFFIXES lib lib64)
find_file(Hwloc_CONFIG_H hwloc/autogen/config.h
  HINTS ${Hwloc_INCLUDE_DIR} ${PC_HWLOC_INCLUDE_DIRS} /usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
if(PC_HWLOC_VERSION)
  set(Hwloc_VERSION "${PC_HWLOC_VERSION}")
elseif(Hwloc_CONFIG_H)
  file(STRINGS "${Hwloc_CONFIG_H}" _hwloc_ver REGEX "^#define HWLOC_VERSION \"")
  string(REGEX MATCH "\"[^\"]+\"" _hwloc_ver "${_hwloc_ver}")
  string(REPLACE "\"" "" Hwloc_VERSION "${_hwloc_ver}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Hwloc REQUIRED_VARS Hwloc_LIBRARY Hwloc_INCLUDE_DIR VERSION_VAR Hwloc_VERSION)
if(Hwloc_FOUND AND Hwloc_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "cclbench needs hwloc 2.x, found ${Hwloc_VERSION}")
endif()
if(Hwloc_FOUND AND NOT TARGET Hwloc::hwloc)
  add_library(Hwloc::hwloc UNKNOWN IMPORTED)
  set_target_properties(Hwloc::hwloc PROPERTIES
    IMPORTED_LOCATION "${Hwloc_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Hwloc_INCLUDE_DIR}")
endif()
mark_as_advanced(Hwloc_INCLUDE_DIR Hwloc_LIBRARY Hwloc_CONFIG_H)
