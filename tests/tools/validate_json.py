#!/usr/bin/env python3
"""Validates JSON or JSON Lines files against a cclbench results schema (draft 2020-12).

usage: validate_json.py [--engine auto|jsonschema|stdlib] SCHEMA FILE [FILE...]
       (FILE ending in .jsonl: every line is validated)
Engines: jsonschema (python3-jsonschema), stdlib (tests/tools/schema_subset.py: the subset of draft
2020-12 that results_schema/ uses, no dependency beyond Python 3). auto (default) takes jsonschema
where it is installed and otherwise stdlib, saying so on stderr, so validation never depends on an
optional package.
Exit 0 when every document validates, 1 otherwise, 2 on usage errors.
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore", category=DeprecationWarning)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schema_subset  # noqa: E402  (next to this file)

try:
    import jsonschema
except ImportError:
    jsonschema = None


def documents(path):
    with open(path, encoding="utf-8") as handle:
        if path.endswith(".jsonl"):
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield f"{path}:{number}", json.loads(line)
        else:
            yield path, json.load(handle)


def sibling_store(schema_path):
    """Sibling schemas are referenced by file name ("case_record.schema.json") or $id: load them all
    locally, so nothing is ever fetched."""
    store = {}
    folder = os.path.dirname(os.path.abspath(schema_path))
    for name in sorted(os.listdir(folder)):
        if name.endswith(".schema.json"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                sibling = json.load(handle)
            store[name] = sibling
            if "$id" in sibling:
                store[sibling["$id"]] = sibling
    return store


def make_validator(engine, schema, store):
    """A function document -> iterator of (path parts, message)."""
    if engine == "jsonschema":
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        resolver = jsonschema.RefResolver(base_uri=schema.get("$id", ""), referrer=schema, store=store)
        validator = validator_class(schema, resolver=resolver, format_checker=jsonschema.FormatChecker())
        return lambda document: ((list(e.absolute_path), e.message) for e in validator.iter_errors(document))
    validator = schema_subset.Validator(schema, store)
    return validator.iter_errors


def main(argv):
    args = argv[1:]
    engine = "auto"
    if args and args[0].startswith("--engine"):
        option = args.pop(0)
        engine = option.partition("=")[2] if "=" in option else (args.pop(0) if args else "")
    if engine not in ("auto", "jsonschema", "stdlib") or len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if engine == "jsonschema" and jsonschema is None:
        print("validate_json.py: --engine jsonschema: python3-jsonschema is not installed", file=sys.stderr)
        return 2
    if engine == "auto":
        engine = "jsonschema" if jsonschema is not None else "stdlib"
        if engine == "stdlib":
            print("validate_json.py: python3-jsonschema is not installed; validating with the stdlib subset "
                  "validator (tests/tools/schema_subset.py)", file=sys.stderr)
    with open(args[0], encoding="utf-8") as handle:
        schema = json.load(handle)
    try:
        check = make_validator(engine, schema, sibling_store(args[0]))
    except schema_subset.SchemaSubsetError as error:
        print(f"validate_json.py: {args[0]}: {error}", file=sys.stderr)
        return 2
    failures = 0
    checked = 0
    for path in args[1:]:
        for where, document in documents(path):
            checked += 1
            try:
                errors = list(check(document))
            except schema_subset.SchemaSubsetError as error:
                print(f"validate_json.py: {args[0]}: {error}", file=sys.stderr)
                return 2
            for parts, message in errors:
                failures += 1
                location = "/".join(str(part) for part in parts)
                print(f"{where}: /{location}: {message}", file=sys.stderr)
    if checked == 0:
        print("validate_json.py: no documents found", file=sys.stderr)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
