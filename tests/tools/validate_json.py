#!/usr/bin/env python3
"""Validates JSON or JSON Lines files against a cclbench results schema (draft 2020-12).

usage: validate_json.py SCHEMA FILE [FILE...]   (FILE ending in .jsonl: every line is validated)
Exit 0 when every document validates, 1 otherwise, 2 on usage errors.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)

try:
    import jsonschema
except ImportError:  # pragma: no cover - reported, not hidden
    print("validate_json.py: python3-jsonschema is not installed (apt-get install python3-jsonschema)", file=sys.stderr)
    sys.exit(2)


def documents(path):
    with open(path, encoding="utf-8") as handle:
        if path.endswith(".jsonl"):
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield f"{path}:{number}", json.loads(line)
        else:
            yield path, json.load(handle)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        schema = json.load(handle)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    # Sibling schemas are referenced by file name ("case_record.schema.json"): load them all locally,
    # so nothing is ever fetched.
    store = {}
    folder = os.path.dirname(os.path.abspath(argv[1]))
    for name in sorted(os.listdir(folder)):
        if name.endswith(".schema.json"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                sibling = json.load(handle)
            store[name] = sibling
            if "$id" in sibling:
                store[sibling["$id"]] = sibling
    resolver = jsonschema.RefResolver(base_uri=schema.get("$id", ""), referrer=schema, store=store)
    validator = validator_class(schema, resolver=resolver, format_checker=jsonschema.FormatChecker())
    failures = 0
    checked = 0
    for path in argv[2:]:
        for where, document in documents(path):
            checked += 1
            for error in validator.iter_errors(document):
                failures += 1
                location = "/".join(str(part) for part in error.absolute_path)
                print(f"{where}: /{location}: {error.message}", file=sys.stderr)
    if checked == 0:
        print("validate_json.py: no documents found", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
