"""Standalone check: JSON valid, every expected tool exists in the blind6 catalogues."""
import json, pathlib, sys
HERE = pathlib.Path(__file__).parent
names = set()
for f in ("catalogue_office.json", "catalogue_lab.json"):
    for app in json.loads((HERE / f).read_text())["apps"]:
        for t in app["tools"]:
            names.add(f"{app['name']}__{t['name']}")
qs = json.loads((HERE / "queries_blind6.json").read_text())
bad = [(q["query"], e) for q in qs for e in q["expected"] if e not in names]
empty = [q["query"] for q in qs if (q["kind"] == "none") != (not q["expected"])]
print(len(names), "tools;", len(qs), "queries;", "missing:", bad, "kind/expected mismatch:", empty)
sys.exit(1 if bad or empty else 0)
