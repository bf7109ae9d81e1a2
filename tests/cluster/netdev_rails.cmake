# coll_perf --netdevs eth0,eth3 on the virtual cluster (test_netdev_rails.py): per-host netdev rail
# shares, and node7's eth3 down seen as ~0 there. Root only: skipped (77) with the reason where the
# harness cannot run. Included by tests/cluster/CMakeLists.txt.
add_test(NAME cluster_netdev_rails COMMAND ${CCLBENCH_PYTHON} test_netdev_rails.py WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(cluster_netdev_rails PROPERTIES
  LABELS cluster
  TIMEOUT 120
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CCLBENCH_SOURCE_DIR=${PROJECT_SOURCE_DIR};CCLBENCH_BINARY_DIR=${PROJECT_BINARY_DIR};PYTHONDONTWRITEBYTECODE=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
