# `cmake --install` and CPack (.deb). Layout under the prefix, relocatable (nothing absolute is
# stored; `cclbench` finds the rest relative to itself through cclbench_lib/install_layout.json):
#   bin/                                coll_perf (+ *_perf names), p2p_matrix, topo_map, nccl_evidence, cclbench
#   share/cclbench/python/cclbench_lib/ the Python library of cclbench
#   share/cclbench/results_schema/      the JSON schemas of every file cclbench writes
#   share/doc/cclbench/README.md
#
# Included before the areas (the RPATH settings apply to targets made afterwards); the install rules
# run at the end of the top-level directory, when every program exists.
include(GNUInstallDirs)

# Installed programs keep the library folders they were linked against outside the build tree
# (Open MPI's, CUDA's): NCCL and cudart often live outside the loader's default path. Built that way
# from the start, so installing never rewrites an ELF file.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)

set(CCLBENCH_INSTALL_PYTHON_DIR "${CMAKE_INSTALL_DATADIR}/cclbench/python")
set(CCLBENCH_INSTALL_SCHEMA_DIR "${CMAKE_INSTALL_DATADIR}/cclbench/results_schema")

# Every program bench/apps builds (coll_perf and its *_perf names, p2p_matrix, topo_map, nccl_evidence).
function(_cclbench_install_programs)
  get_property(targets DIRECTORY "${PROJECT_SOURCE_DIR}/bench/apps" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cclbench)
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _cclbench_install_programs)

install(PROGRAMS "${PROJECT_SOURCE_DIR}/scripts/cclbench" DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cclbench)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/scripts/cclbench_lib" DESTINATION ${CCLBENCH_INSTALL_PYTHON_DIR}
        COMPONENT cclbench FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/results_schema/" DESTINATION ${CCLBENCH_INSTALL_SCHEMA_DIR}
        COMPONENT cclbench FILES_MATCHING PATTERN "*.schema.json")
install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cclbench)

# Where the installed library finds the programs and schemas, relative to its own folder.
set(_lib_dir "/prefix/${CCLBENCH_INSTALL_PYTHON_DIR}/cclbench_lib")
file(RELATIVE_PATH CCLBENCH_REL_BIN_DIR "${_lib_dir}" "/prefix/${CMAKE_INSTALL_BINDIR}")
file(RELATIVE_PATH CCLBENCH_REL_SCHEMA_DIR "${_lib_dir}" "/prefix/${CCLBENCH_INSTALL_SCHEMA_DIR}")
file(WRITE "${PROJECT_BINARY_DIR}/install_layout.json"
     "{\n  \"bin_dir\": \"${CCLBENCH_REL_BIN_DIR}\",\n  \"schema_dir\": \"${CCLBENCH_REL_SCHEMA_DIR}\",\n"
     "  \"git_commit\": \"${CCLBENCH_GIT_COMMIT}\"\n}\n")
install(FILES "${PROJECT_BINARY_DIR}/install_layout.json" DESTINATION "${CCLBENCH_INSTALL_PYTHON_DIR}/cclbench_lib"
        COMPONENT cclbench)

# --- the Debian package ------------------------------------------------------------------------
# Runtime libraries from Debian packages are named after the package that holds them here (so the
# names are right on Debian 12 and on Ubuntu's t64 renames); NCCL and the CUDA runtime come from
# NVIDIA's repository, so they are recommended, not required: the host-only tools run without them.
function(cclbench_deb_package_of library fallback out)
  set(${out} "${fallback}" PARENT_SCOPE)
  find_program(_dpkg_query dpkg-query)
  if(_dpkg_query)
    execute_process(COMMAND ${_dpkg_query} -S "*/${library}" OUTPUT_VARIABLE _owner ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_owner MATCHES "^([a-z0-9.+-]+)(:[a-z0-9]+)?: ")
      set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
    endif()
  endif()
endfunction()
cclbench_deb_package_of(libmpi.so.40 libopenmpi3 _deb_mpi)
cclbench_deb_package_of(libhwloc.so.15 libhwloc15 _deb_hwloc)

set(CPACK_PACKAGE_NAME cclbench)
set(CPACK_PACKAGE_VENDOR cclbench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NCCL/CUDA communication microbenchmarks and a one-command cluster baseline")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "cclbench maintainers <cclbench@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "${_deb_mpi}, openmpi-bin, ${_deb_hwloc}, python3 (>= 3.9), libstdc++6, libgcc-s1, libc6")
set(_recommends "python3-matplotlib")
if(CCLBENCH_HAVE_CUDA)
  set(_recommends "libnccl2, cuda-cudart-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}, ${_recommends}")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "${_recommends}")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, python3-jsonschema")
include(CPack)
