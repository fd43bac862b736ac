#!/usr/bin/env python3
"""Writes charts/allocguard/README.md (what `helm show readme` prints) from
the chart's values.yaml and values.schema.json: a table of every value with
its type, default and the comment above it in values.yaml.

  python3 charts/scripts/values_readme.py           # write the README
  python3 charts/scripts/values_readme.py --check   # exit 1 when it is stale

values.yaml is read line by line (no YAML library): a key's description is
the comment block right above it; comment lines that show example YAML
(`#   name: my-ca`, `# from:`, `#   - ipBlock:`) are left out of it. A key
whose value is on its own lines is a group; each leaf below it is a row.
"""
import json
import pathlib
import re
import sys

CHART = pathlib.Path(__file__).resolve().parents[1] / "allocguard"
KEY = re.compile(r"^( *)([A-Za-z0-9_]+):(?: (.*))?$")
EXAMPLE = re.compile(r"^#(\s{2,}|\s*-\s|\s*[A-Za-z0-9_]+:\s*$)")

HEADER = """# allocguard

{description}

Chart {version}, allocguard {app_version}, Kubernetes {kube_version}.

```sh
helm install allocguard <this chart> --namespace allocguard-system --create-namespace
kubectl -n allocguard-system rollout status deployment/allocguard
```

Then apply a first AllocatorPolicy in Audit mode (the install's notes print
one). The user's guide, the fields of the two CRDs and the troubleshooting
runbooks are in the allocguard repository's `docs/` (install.md, crds.md,
user-guide.md, troubleshooting.md).

## Values

Generated from `values.yaml` and `values.schema.json` by
`charts/scripts/values_readme.py`; the schema refuses an unknown key or a
wrong type, naming the value.

| value | type | default | description |
|---|---|---|---|
"""


def parse_values(text):
    """[(dotted key, default text or None for a group, description)]"""
    rows, stack, comments = [], [], []
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            comments = []
            continue
        if stripped.startswith("#"):
            if not EXAMPLE.match(stripped):
                comments.append(stripped.lstrip("#").strip())
            continue
        m = KEY.match(line)
        if not m:
            comments = []
            continue  # a list item or continuation of a value
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        if value is None or value == "":
            rows.append((path, None, " ".join(comments)))
            stack.append((indent, key))
        else:
            rows.append((path, value.split(" #", 1)[0].strip(), " ".join(comments)))
        comments = []
    return rows


def schema_type(schema, path):
    node, walked = schema, []
    for part in path.split("."):
        if node.get("type") == "object" and "properties" not in node and walked:
            return f"in object `{'.'.join(walked)}`"  # a free-form object, e.g. resources
        child = node.get("properties", {}).get(part)
        if child is None:
            if node.get("additionalProperties", True) is not False and walked:
                return f"in object `{'.'.join(walked)}`"  # open to more keys
            return None
        node = child
        walked.append(part)
    if "const" in node:
        return f"`{json.dumps(node['const'])}` only"
    t = node.get("type", "")
    if not t and ("oneOf" in node or "anyOf" in node):
        t = " or ".join(sorted({o.get("type", "") for o in node.get("oneOf", node.get("anyOf"))}))
    if isinstance(t, list):
        t = " or ".join(t)
    if "enum" in node:
        t = " \\| ".join(f"`{v}`" for v in node["enum"])
    return t


def cell(text):
    return text.replace("|", "\\|")


def render():
    chart = (CHART / "Chart.yaml").read_text()

    def field(name):
        m = re.search(rf"^{name}: *(.*)$", chart, re.M)
        return m.group(1).strip().strip('"') if m else ""

    desc = re.search(r"^description: >-\n((?:  .*\n)+)", chart, re.M)
    description = " ".join(l.strip() for l in desc.group(1).splitlines()) if desc else ""
    schema = json.loads((CHART / "values.schema.json").read_text())
    rows = parse_values((CHART / "values.yaml").read_text())
    out = HEADER.format(description=description, version=field("version"),
                        app_version=field("appVersion"), kube_version=field("kubeVersion"))
    for path, default, text in rows:
        if default is None:  # a group: a row of its own when it says something
            if text:
                out += f"| `{path}` | object | | {cell(text)} |\n"
            continue
        t = schema_type(schema, path)
        if t is None:
            raise SystemExit(f"values.yaml key {path} is not in values.schema.json")
        out += f"| `{path}` | {t} | `{cell(default)}` | {cell(text)} |\n"
    return out, rows


def schema_leaves(node, prefix=""):
    """Dotted paths of the schema's closed objects' properties (Helm's own
    `global` aside): each must be a key of values.yaml."""
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        if path == "global":
            continue
        if child.get("type") == "object" and child.get("additionalProperties") is False:
            yield from schema_leaves(child, path + ".")
        else:
            yield path


def main():
    text, rows = render()
    readme = CHART / "README.md"
    if "--check" in sys.argv[1:]:
        failures = 0
        keys = {path for path, _, _ in rows}
        schema = json.loads((CHART / "values.schema.json").read_text())
        leaves = {path for path, d, _ in rows if d is not None}
        for path in schema_leaves(schema):
            parts = path.split(".")
            under_leaf = any(".".join(parts[:i]) in leaves for i in range(1, len(parts)))
            if path not in keys and not under_leaf:
                print(f"values.schema.json has {path}, values.yaml does not")
                failures += 1
        if not readme.exists() or readme.read_text() != text:
            print(f"{readme} is stale: run python3 charts/scripts/values_readme.py")
            failures += 1
        print(f"{readme.name}: {sum(1 for _, d, _ in rows if d is not None)} values; "
              f"{failures} failures")
        return 1 if failures else 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
