"""A stdlib-only validator for the part of JSON Schema draft 2020-12 that results_schema/ uses.

Why: tests validate every document cclbench writes, and the GPU machines do not have
python3-jsonschema. Python 3 is the one interpreter the build guarantees, so this module is the
validator that is always there; tests/scripts/test_schema_subset.py checks that it accepts and
rejects exactly what python3-jsonschema does on the same documents (where that is installed).

A schema that uses a keyword outside the subset is refused (SchemaSubsetError), never silently
half-checked: adding e.g. "uniqueItems" to a schema makes validation fail until this file learns it.
"""
import re
import urllib.parse

# Annotations: no effect on validity.
_ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "default", "examples", "$defs"}
_KEYWORDS = {
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "properties", "patternProperties", "additionalProperties",
    "required", "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
}


class SchemaSubsetError(Exception):
    """The schema uses something this validator does not implement."""


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_type(value, name):
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        # Draft 2020-12: 1.0 is an integer.
        return _is_number(value) and (isinstance(value, int) or float(value).is_integer())
    if name == "number":
        return _is_number(value)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    raise SchemaSubsetError(f"unknown type {name!r}")


def _json_equal(left, right):
    """JSON equality: true is not 1, 1 equals 1.0, objects and arrays compare member by member."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_json_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def _pointer(document, fragment):
    node = document
    if fragment in ("", "/"):
        return node
    for raw in fragment.lstrip("/").split("/"):
        part = urllib.parse.unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise SchemaSubsetError(f"unresolvable JSON pointer #{fragment}")
    return node


class Validator:
    """Validates documents against one root schema; store maps URIs and file names to sibling schemas."""

    def __init__(self, schema, store=None):
        self.root = schema
        self.store = dict(store or {})
        self.base = schema.get("$id", "") if isinstance(schema, dict) else ""
        if self.base:
            self.store.setdefault(self.base, schema)
        self._check_keywords(schema, set())

    def _check_keywords(self, schema, seen):
        if isinstance(schema, bool) or id(schema) in seen:
            return
        if not isinstance(schema, dict):
            raise SchemaSubsetError(f"a schema must be an object or a boolean, not {type(schema).__name__}")
        seen.add(id(schema))
        for key, value in schema.items():
            if key not in _KEYWORDS and key not in _ANNOTATIONS:
                raise SchemaSubsetError(f"keyword {key!r} is not supported by tests/tools/schema_subset.py")
            if key in ("properties", "patternProperties", "$defs"):
                for child in value.values():
                    self._check_keywords(child, seen)
            elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
                for child in value:
                    self._check_keywords(child, seen)
            elif key in ("items", "additionalProperties", "propertyNames", "not", "if", "then", "else"):
                if isinstance(value, list):
                    raise SchemaSubsetError(f"{key!r} as an array is not supported")
                self._check_keywords(value, seen)

    def _resolve(self, reference, base):
        absolute = urllib.parse.urljoin(base, reference) if base else reference
        document_uri, _, fragment = absolute.partition("#")
        if not document_uri or document_uri == base:
            document = self.store.get(base, self.root) if base else self.root
            new_base = base
        else:
            document = self.store.get(document_uri)
            if document is None:  # referenced by bare file name, e.g. "case_record.schema.json"
                document = self.store.get(document_uri.rsplit("/", 1)[-1])
            if document is None:
                raise SchemaSubsetError(f"cannot resolve $ref {reference!r}")
            new_base = document.get("$id", document_uri)
            self._check_keywords(document, set())
        return _pointer(document, fragment), new_base

    def iter_errors(self, document):
        """Yields (path list, message) for every violation."""
        yield from self._errors(document, self.root, [], self.base)

    def is_valid(self, document):
        return next(self.iter_errors(document), None) is None

    def _valid(self, instance, schema, base):
        return next(self._errors(instance, schema, [], base), None) is None

    def _errors(self, instance, schema, path, base):
        if schema is True:
            return
        if schema is False:
            yield path, "False schema does not allow this value"
            return
        if "$id" in schema and schema is not self.root:
            base = urllib.parse.urljoin(base, schema["$id"])
        if "$ref" in schema:
            target, target_base = self._resolve(schema["$ref"], base)
            yield from self._errors(instance, target, path, target_base)
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_is_type(instance, name) for name in names):
                yield path, f"{instance!r} is not of type {', '.join(repr(n) for n in names)}"
        if "enum" in schema and not any(_json_equal(instance, option) for option in schema["enum"]):
            yield path, f"{instance!r} is not one of {schema['enum']!r}"
        if "const" in schema and not _json_equal(instance, schema["const"]):
            yield path, f"{schema['const']!r} was expected"
        if _is_number(instance):
            yield from self._number_errors(instance, schema, path)
        if isinstance(instance, str):
            yield from self._string_errors(instance, schema, path)
        if isinstance(instance, dict):
            yield from self._object_errors(instance, schema, path, base)
        if isinstance(instance, list):
            yield from self._array_errors(instance, schema, path, base)
        yield from self._combinator_errors(instance, schema, path, base)

    @staticmethod
    def _number_errors(instance, schema, path):
        if "minimum" in schema and instance < schema["minimum"]:
            yield path, f"{instance!r} is less than the minimum of {schema['minimum']!r}"
        if "maximum" in schema and instance > schema["maximum"]:
            yield path, f"{instance!r} is greater than the maximum of {schema['maximum']!r}"
        if "exclusiveMinimum" in schema and instance <= schema["exclusiveMinimum"]:
            yield path, f"{instance!r} is less than or equal to the minimum of {schema['exclusiveMinimum']!r}"
        if "exclusiveMaximum" in schema and instance >= schema["exclusiveMaximum"]:
            yield path, f"{instance!r} is greater than or equal to the maximum of {schema['exclusiveMaximum']!r}"

    @staticmethod
    def _string_errors(instance, schema, path):
        if "minLength" in schema and len(instance) < schema["minLength"]:
            yield path, f"{instance!r} is too short"
        if "maxLength" in schema and len(instance) > schema["maxLength"]:
            yield path, f"{instance!r} is too long"
        if "pattern" in schema and not re.search(schema["pattern"], instance):
            yield path, f"{instance!r} does not match {schema['pattern']!r}"

    def _object_errors(self, instance, schema, path, base):
        for name in schema.get("required", []):
            if name not in instance:
                yield path, f"{name!r} is a required property"
        if "minProperties" in schema and len(instance) < schema["minProperties"]:
            yield path, f"{instance!r} does not have enough properties"
        if "maxProperties" in schema and len(instance) > schema["maxProperties"]:
            yield path, f"{instance!r} has too many properties"
        properties = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        extra = []
        for name, value in instance.items():
            matched = False
            if name in properties:
                matched = True
                yield from self._errors(value, properties[name], path + [name], base)
            for pattern, child in patterns.items():
                if re.search(pattern, name):
                    matched = True
                    yield from self._errors(value, child, path + [name], base)
            if not matched:
                extra.append(name)
            if "propertyNames" in schema:
                for _, message in self._errors(name, schema["propertyNames"], [], base):
                    yield path, f"property name {name!r}: {message}"
        if "additionalProperties" in schema:
            additional = schema["additionalProperties"]
            if additional is False and extra:
                yield path, f"Additional properties are not allowed ({', '.join(repr(n) for n in extra)} unexpected)"
            elif additional is not False:
                for name in extra:
                    yield from self._errors(instance[name], additional, path + [name], base)

    def _array_errors(self, instance, schema, path, base):
        if "minItems" in schema and len(instance) < schema["minItems"]:
            yield path, f"{instance!r} should have at least {schema['minItems']} items"
        if "maxItems" in schema and len(instance) > schema["maxItems"]:
            yield path, f"{instance!r} should have at most {schema['maxItems']} items"
        # Draft 2020-12: prefixItems validates the leading positions; items then applies to the rest.
        prefix = schema.get("prefixItems", [])
        for index, (item, child) in enumerate(zip(instance, prefix)):
            yield from self._errors(item, child, path + [index], base)
        if "items" in schema:
            for index, item in enumerate(instance[len(prefix):], start=len(prefix)):
                yield from self._errors(item, schema["items"], path + [index], base)

    def _combinator_errors(self, instance, schema, path, base):
        for child in schema.get("allOf", []):
            yield from self._errors(instance, child, path, base)
        if "anyOf" in schema and not any(self._valid(instance, child, base) for child in schema["anyOf"]):
            yield path, f"{instance!r} is not valid under any of the given schemas (anyOf)"
        if "oneOf" in schema:
            passing = sum(1 for child in schema["oneOf"] if self._valid(instance, child, base))
            if passing != 1:
                yield path, f"{instance!r} is valid under {passing} of the given schemas, not exactly one (oneOf)"
        if "not" in schema and self._valid(instance, schema["not"], base):
            yield path, f"{instance!r} should not be valid under {schema['not']!r}"
        if "if" in schema:
            if self._valid(instance, schema["if"], base):
                if "then" in schema:
                    yield from self._errors(instance, schema["then"], path, base)
            elif "else" in schema:
                yield from self._errors(instance, schema["else"], path, base)
