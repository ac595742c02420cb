#!/usr/bin/env python3
"""Validates launcher app definitions against Marathon's AppDefinition JSON schema.

    validate_app.py SCHEMA FILE...

Prints one line per violation (file, JSON path, message) and exits 1 if any file is invalid.
The schema is Marathon's draft-04 document (tuple `items`, `additionalItems`), so it is
checked with the draft-04 validator, not whatever draft `$schema` would default to.
"""
import json
import sys

import jsonschema


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft4Validator.check_schema(schema)
    validator = jsonschema.Draft4Validator(schema)
    bad = 0
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        for e in errors:
            where = "/" + "/".join(str(p) for p in e.absolute_path)
            print(f"{path}: {where}: {e.message}")
        bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
