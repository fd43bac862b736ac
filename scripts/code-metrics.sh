#!/usr/bin/env bash
# Prints the figures the architecture work is measured by, the same way every
# time (docs/architecture.md keeps them before and after each change):
#   1. the five longest functions of the product (tests left out) with their
#      cyclomatic complexity, and the five most complex, by lizard (PyPI;
#      installed here if missing);
#   2. how many times each verdict and canary phase is spelled as a string
#      literal outside tests, and in how many files;
#   3. JSON accessors (nlohmann::json reads and the kube/object.h helpers)
#      outside the parsing layer, in controllers/ and operator/admission/.
# Usage: scripts/code-metrics.sh   (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v lizard >/dev/null || python3 -m pip install --quiet lizard

sources() {  # product sources under the given directories, tests left out
  find "$@" -name '*.cc' -o -name '*.h' | grep -vE '_test\.cc$|_for_test\.h$|/testing/|/tests/' | sort
}

echo "== functions (lizard; NLOC = lines of code, CCN = cyclomatic complexity)"
# shellcheck disable=SC2046
lizard --csv $(sources operator controllers) 2>/dev/null | python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 8 and r[0].isdigit()]
fns = [(int(r[0]), int(r[1]), r[7], r[6]) for r in rows]  # nloc, ccn, name, file
for title, key in (("longest", 0), ("most complex", 1)):
    print(f"-- five {title}")
    for nloc, ccn, name, path in sorted(fns, key=lambda f: -f[key])[:5]:
        print(f"{nloc:6d} lines  CCN {ccn:3d}  {name}  ({path})")
print(f"-- {len(fns)} functions; {sum(1 for f in fns if f[1] > 15)} with CCN > 15")
'

echo "== verdict and phase names spelled as string literals (product code, tests left out)"
printf '%-22s %6s %6s\n' literal uses files
for name in Flat Ratchet AllocatorRetention Leak OOMKilled Errors Inconclusive Failed \
  Pending Running Completed Stalled phase verdict; do
  # shellcheck disable=SC2046
  uses=$(grep -o "\"$name\"" $(sources operator controllers) | wc -l)
  # shellcheck disable=SC2046
  files=$(grep -l "\"$name\"" $(sources operator controllers) | wc -l)
  printf '%-22s %6d %6d\n' "\"$name\"" "$uses" "$files"
done

echo "== JSON accessors outside the parsing layer (controllers/, operator/admission/)"
# Reads of nlohmann::json values: .value( .at( .contains( .is_<type>( ["key"]
# .get<  and the kube/object.h helpers (Field, FieldOrNull, StringField,
# Annotation, Labels).
pattern='\.value\(|\.at\(|\.contains\(|\.is_(string|object|array|number|boolean|null)\(|\["[^"]*"\]|\.get<|\b(FieldOrNull|StringField|Field|Str|Annotation|HasAnnotation|Labels)\('
for dir in controllers operator/admission; do
  # shellcheck disable=SC2046
  count=$(grep -oE "$pattern" $(sources "$dir") | wc -l)
  printf '%-22s %6d\n' "$dir/" "$count"
done
