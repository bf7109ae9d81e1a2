# -N 2 on the MPI backend (2 ranks): every case recorded once per cycle with its cycle number, the
# JSON/CSV/JSONL agree and validate (schema 1.3); mulsum is skipped per case with MPI's reason; the
# NCCL-only flags (-G, -R, -x, -m, -u) are refused with exit 2 and the reason.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np 2 ${COLL_PERF} --backend mpi --coll all_reduce,all_gather
          -o sum,mulsum -b 8K -e 16K -f 2 -n 3 -w 1 -N 2 -I 1 -C 1 -S 1 -M 1
          -J ${WORK_DIR}/out.json --jsonl ${WORK_DIR}/out.jsonl --csv ${WORK_DIR}/out.csv --quiet
  RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "coll_perf exited ${status}\n${output}\n${errors}")
endif()
execute_process(
  COMMAND ${PYTHON} -c "
import csv, json, sys
sys.path.insert(0, sys.argv[4])
from cclbench_lib.model.records import with_defaults
doc = json.load(open(sys.argv[1]))
# Schema 1.3: a field at its default (cycle 0, the eager mode fields) is left out; read as every reader does.
assert all('cycle' not in c and 'graph_launches' not in c for c in doc['cases'][:12]), doc['cases'][0]
cases = [with_defaults(c) for c in doc['cases']]
assert doc['status'] == 'complete', doc['status']
# all_reduce: 2 ops x 2 sizes x 2 placements, all_gather: 2 x 2; twice.
assert len(cases) == 2 * (8 + 4), len(cases)
assert [c['cycle'] for c in cases] == [0] * 12 + [1] * 12, [c['cycle'] for c in cases]
assert [c['case_id'] for c in cases[:12]] == [c['case_id'] for c in cases[12:]]
for c in cases:
    assert (c['graph_launches'], c['ops_per_launch'], c['registration'], c['unalign_elements'], c['cta_policy']) == (0, 1, 'none', 0, None), c
    if c['op'] == 'mulsum':
        assert c['status'] == 'skipped' and c['reason'] == 'MPI has no mulsum reduction' and c['samples_from'] is None, c
    else:
        assert c['status'] == 'ok' and c['wrong'] == 0 and c['samples_from'] == 'host_clock', c
lines = [with_defaults(json.loads(l)) for l in open(sys.argv[2])]
assert [(l['case_id'], l['cycle']) for l in lines] == [(c['case_id'], c['cycle']) for c in cases]
rows = list(csv.DictReader(open(sys.argv[3])))
assert [(r['case_id'], r['cycle']) for r in rows] == [(c['case_id'], str(c['cycle'])) for c in cases]
print('ok: 24 records over 2 cycles')
" ${WORK_DIR}/out.json ${WORK_DIR}/out.jsonl ${WORK_DIR}/out.csv ${SOURCE_DIR}/scripts
  RESULT_VARIABLE check_status)
if(NOT check_status EQUAL 0)
  message(FATAL_ERROR "record checks failed")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/validate_outputs.cmake)
foreach(flag "-G;2" "-R;1" "-x;0" "-m;2" "-u;1")
  execute_process(
    COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np 2 ${COLL_PERF} --backend mpi -b 8K -e 8K ${flag}
    RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE errors)
  list(GET flag 0 name)
  if(NOT status EQUAL 2 OR NOT errors MATCHES "error: ${name}: .*\\(--backend mpi\\)")
    message(FATAL_ERROR "--backend mpi ${flag}: exit ${status} (expected 2 with the reason)\n${errors}")
  endif()
endforeach()
