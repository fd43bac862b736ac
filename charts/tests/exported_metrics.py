"""The allocguard_* metric names the code exports, for the tests that check
the dashboard's queries and the alerting rules' expressions."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
METRIC = re.compile(r"\ballocguard_[a-zA-Z0-9_]+")
SERIES_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_names():
    """Registered family names: string literals in operator/ or controllers/."""
    names = set()
    literal = re.compile(r'"(allocguard_[a-zA-Z0-9_]+)"')
    for folder in ("operator", "controllers"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".cc", ".h") and not path.name.endswith("_test.cc"):
                names.update(literal.findall(path.read_text(errors="replace")))
    return names


def missing_metrics(expr, names):
    """The allocguard_* names in a PromQL expression that the code does not
    export (a histogram's _bucket/_sum/_count series count as exported)."""
    missing = []
    for name in METRIC.findall(expr):
        if name in names:
            continue
        base = next((name[: -len(s)] for s in SERIES_SUFFIXES if name.endswith(s)), None)
        if base is None or base not in names:
            missing.append(name)
    return missing
