#!/usr/bin/env python3
"""Standalone check of the blind8 set (standard library only; imports nothing from broker)."""
import json, os, re, sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["plain", "typo", "realword", "paraphrase", "param", "none"]
STOP = set("""a an the and or of to in on for with by from at as is it its be are was this that these those
i me my we our you your he she they them their his her can could would should will shall do does did done
not no so if then than into onto out up down off over under about all any each every some more most less
one two three what which who whom how when where why there here just also only own same such too very
get got make made let lets please want need like using use have has had may might must am been being
via per new many much after before again still while both between without within""".split())


def words(text):
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # split CamelCase app names: StarDome -> Star Dome
    return [w for w in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")) if len(w) > 2 and w not in STOP]


def stem(w):
    for suf in ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "s", "ly", "e", "y"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            break
    return w[:5]


def stems(text):
    return {stem(w) for w in words(text)}


def overlap(qtext, ttext):
    """Crude stems shared, plus words of one side that start with a stem (4+ letters) of the other (stargazing/Star)."""
    qw, tw = words(qtext), words(ttext)
    qs, ts = {stem(w) for w in qw}, {stem(w) for w in tw}
    shared = qs & ts
    shared |= {s for s in ts if len(s) >= 4 and any(w.startswith(s) for w in qw)}
    shared |= {s for s in qs if len(s) >= 4 and any(w.startswith(s) for w in tw)}
    return shared


def main(here=HERE, catalogues=("catalogue_make.json", "catalogue_learn.json"), query_file="queries_blind8.json"):
    """Check a blind set's files in ``here`` (blind9's check calls this with its own names)."""
    tools = {}
    for cat in catalogues:
        with open(os.path.join(here, cat), encoding="utf-8") as f:
            for app in json.load(f)["apps"]:
                for t in app["tools"]:
                    params = " ".join(k + " " + p.get("description", "") + " " + " ".join(map(str, p.get("enum", [])))
                                      for k, p in t["inputSchema"].get("properties", {}).items())
                    tools[f"{app['name']}__{t['name']}"] = (app["name"], t["name"], t["description"], params)
    with open(os.path.join(here, query_file), encoding="utf-8") as f:
        queries = json.load(f)
    errors, warnings = [], []
    seen = set()
    for q in queries:
        text, exp, kind = q["query"], q["expected"], q["kind"]
        if kind not in KINDS:
            errors.append(f"bad kind {kind!r}: {text}")
        key = text.strip().lower()
        if key in seen:
            errors.append(f"duplicate query: {text}")
        seen.add(key)
        if (kind == "none") != (not exp):
            errors.append(f"none iff empty expected broken: {text}")
        for e in exp:
            if e not in tools:
                errors.append(f"unknown tool {e}: {text}")
        known = [tools[e] for e in exp if e in tools]
        qs = stems(text)
        if kind == "paraphrase":
            for app, name, desc, params in known:
                shared = overlap(text, " ".join((app, name, desc, params)))
                if shared:
                    warnings.append(f"paraphrase shares {sorted(shared)} with {app}__{name}: {text}")
        if kind == "param":
            for app, name, desc, params in known:
                only = qs & (stems(params) - stems(app) - stems(name) - stems(desc))
                if not only:
                    warnings.append(f"param query has no param-only word for {app}__{name}: {text}")
    counts = Counter(q["kind"] for q in queries)
    print(f"tools: {len(tools)}; apps: {len({v[0] for v in tools.values()})}")
    for k in KINDS:
        print(f"{k:11s} {counts.get(k, 0)}")
    print(f"{'total':11s} {len(queries)}")
    for w in warnings:
        print("WARN", w)
    for e in errors:
        print("ERROR", e)
    print(f"{len(errors)} errors, {len(warnings)} warnings")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
