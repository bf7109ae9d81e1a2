# mpirun --oversubscribe -np 4 coll_perf --backend mpi over the user's range, 8K to 64M: 8K..4M x2 and 64M
# (11 sizes), the four collectives, both placements; then: 44 records per placement, 0 wrong, every
# record ok, JSON/JSONL schema-valid, CSV with one row per record.
# 8M, 16M and 32M are left out: no code path of coll_perf or the MPI backend changes above 4M (64M
# stays as the range's end), and they were half of this test's time (8M..64M were 90% of it); the
# -b 8K -e 64M -f 2 sweep itself is config_test's. -n 2 (two timed iterations: a slowest rank per
# iteration, buffer offsets rotated once) instead of 5.
set(sizes 8192)
foreach(step RANGE 1 9)
  math(EXPR size "8192 << ${step}")
  string(APPEND sizes ",${size}")
endforeach()
string(APPEND sizes ",67108864")
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np 4 ${COLL_PERF} --backend mpi --sizes ${sizes} -n 2 -w 1
          -J ${WORK_DIR}/out.json --jsonl ${WORK_DIR}/out.jsonl --csv ${WORK_DIR}/out.csv --quiet
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "coll_perf exited ${status}\n${output}\n${errors}")
endif()
execute_process(
  COMMAND ${PYTHON} -c "
import csv, json, sys
doc = json.load(open(sys.argv[1]))
cases = doc['cases']
assert doc['status'] == 'complete', doc['status']
sizes = [8192 << k for k in range(10)] + [64 << 20]
for placement in (False, True):
    subset = [c for c in cases if c['in_place'] == placement]
    assert len(subset) == 44, (placement, len(subset))
    for collective in ('all_reduce', 'all_gather', 'reduce_scatter', 'alltoall'):
        assert [c['requested_bytes'] for c in subset if c['collective'] == collective] == sizes, (placement, collective)
assert all(c['status'] == 'ok' and c['wrong'] == 0 and c['nranks'] == 4 for c in cases), [c for c in cases if c['status'] != 'ok'][:1]
assert all(c['busbw_gbps'] > 0 and c['time_us']['p99'] >= c['time_us']['p50'] for c in cases)
# The MPI backend has no gated loop: bandwidth comes from the per-iteration mean, and says so.
assert all(c['gated_time_us'] is None and c['bandwidth_from'] == 'time_us.mean' for c in cases)
assert all(abs(c['algbw_gbps'] * c['time_us']['mean'] * 1e3 - c['bytes']) <= 1e-6 * c['bytes'] for c in cases if c['collective'] == 'all_reduce')
# per_rank: one entry per world rank; in every iteration some rank holds the max (ties may add more).
for c in cases:
    share = c['per_rank']
    assert len(share['mean_us']) == 4 and len(share['slowest_iterations']) == 4, share
    assert c['iterations'] <= sum(share['slowest_iterations']) <= 4 * c['iterations'], share
    assert max(share['mean_us']) <= c['time_us']['mean'] * (1 + 1e-9) and min(share['mean_us']) > 0, (share, c['time_us'])
lines = [json.loads(l) for l in open(sys.argv[2])]
assert [l['case_id'] for l in lines] == [c['case_id'] for c in cases]
rows = list(csv.DictReader(open(sys.argv[3])))
assert len(rows) == 88 and rows[0]['case_id'] == 'all_reduce.float.sum.out.8K', len(rows)
print('ok: 88 records, 0 wrong')
" ${WORK_DIR}/out.json ${WORK_DIR}/out.jsonl ${WORK_DIR}/out.csv
  RESULT_VARIABLE check_status)
if(NOT check_status EQUAL 0)
  message(FATAL_ERROR "record checks failed")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/validate_outputs.cmake)
