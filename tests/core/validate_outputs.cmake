# Included by the coll_perf MPI end-to-end scripts (cmake -P): ${WORK_DIR}/out.json and out.jsonl
# must validate against the current results schemas (tests/tools/validate_json.py).
foreach(pair "coll_perf.schema.json;out.json" "case_record.schema.json;out.jsonl")
  list(GET pair 0 schema)
  list(GET pair 1 file)
  execute_process(COMMAND ${PYTHON} ${SOURCE_DIR}/tests/tools/validate_json.py ${SOURCE_DIR}/results_schema/${schema} ${WORK_DIR}/${file}
                  RESULT_VARIABLE schema_status)
  if(NOT schema_status EQUAL 0)
    message(FATAL_ERROR "${file} does not validate against ${schema}")
  endif()
endforeach()
