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
# Usage: scripts/code-metrics.sh [--reads]   (from anywhere in the repository;
#        --reads lists each remaining JSON read)
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
# .get<  and the kube/object.h and json_fields helpers (Field, FieldOrNull,
# StringField, Str, Annotation, HasAnnotation, Labels). "pattern" is the
# first, textual count (kept so figures stay comparable over time); it also
# counts what is no JSON read at all: member calls on typed values
# (meta.Annotation(...), a Result's .value()) and subscripts that are written
# to (patch["spec"] = ...). "reads" leaves those out, and lists each
# remaining read with its line (scripts/code-metrics.sh --reads).
pattern='\.value\(|\.at\(|\.contains\(|\.is_(string|object|array|number|boolean|null)\(|\["[^"]*"\]|\.get<|\b(FieldOrNull|StringField|Field|Str|Annotation|HasAnnotation|Labels)\('
printf '%-22s %8s %6s\n' folder pattern reads
for dir in controllers operator/admission; do
  # shellcheck disable=SC2046
  count=$(grep -oE "$pattern" $(sources "$dir") | wc -l)
  # shellcheck disable=SC2046
  reads=$(python3 - "${1:-}" $(sources "$dir") <<'PY'
import re, sys
show = sys.argv[1] == "--reads"
read = re.compile(
    r"\.value\((?!\))|\.at\(|\.contains\(|\.is_(string|object|array|number|boolean|null)\("
    r'|\["[^"]*"\]|\.get<|(?<![.>])\b(FieldOrNull|StringField|Field|Str|Annotation|HasAnnotation|Labels)\(')
# A chain of subscripts that is assigned to: a write, not a read.
write = re.compile(r'(\[[^\]\[]*\])+\s*=(?!=)')
n = 0
for path in sys.argv[2:]:
    for i, line in enumerate(open(path), 1):
        code = write.sub("", line.split("//")[0])
        for m in read.finditer(code):
            n += 1
            if show:
                print(f"   {path}:{i}: {line.strip()}", file=sys.stderr)
print(n)
PY
)
  printf '%-22s %8d %6d\n' "$dir/" "$count" "$reads"
done
