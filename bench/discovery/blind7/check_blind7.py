"""Check blind7's files (standard library only, imports nothing from broker).

    python3 bench/discovery/blind7/check_blind7.py

Errors (exit 1): an expected name missing from the catalogues, an unknown kind, a duplicate
query, a `none` query with an expected tool or an answerable query without one, a duplicate
app or tool name. Warnings (printed, not fatal): a paraphrase sharing a content word (crude
stem) with its tool's name or description; a param query with no word that is in the tool's
parameter text and not in its name or description. Prints the counts per kind.
"""
import collections
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOGUES = ("catalogue_media.json", "catalogue_ops.json")
QUERIES = "queries_blind7.json"
KINDS = ("plain", "typo", "realword", "paraphrase", "param", "none")

STOP = set("""a an the and or of to in on for at by with from into onto as is are was be been
it its it's this that these those my me i i'm you your we our us he she her his they them
their what which who whom how when where why do does did done doing can can't cannot could
would should will just so too very not no don't isn't all any each every other some such
only also than then there here up out off over under about after before again while if
get got make made use let want need have has had one two per new without""".split())


def stem(w):
    w = w.lower().strip("'")
    for suf in ("ations", "ation", "ings", "ing", "ers", "er", "ied", "ies", "ed", "es", "s", "ly"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def words(text):
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ")
    return [w for w in re.findall(r"[A-Za-z][A-Za-z0-9'.-]*[A-Za-z0-9]|[A-Za-z]", text)]


def content_stems(text):
    return {stem(w) for w in words(text) if w.lower() not in STOP}


def param_text(schema, out=None):
    out = [] if out is None else out
    for p in (schema or {}).get("properties", {}).values():
        out.append(p.get("description", ""))
        out.extend(str(v) for v in p.get("enum", []))
        if p.get("type") == "object":
            param_text(p, out)
    return " ".join(out)


def main():
    errors, warnings = [], []
    tools, apps = {}, set()
    for name in CATALOGUES:
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            cat = json.load(f)
        for app in cat["apps"]:
            if app["name"] in apps:
                errors.append("duplicate app " + app["name"])
            apps.add(app["name"])
            seen = set()
            for t in app["tools"]:
                if t["name"] in seen:
                    errors.append("duplicate tool %s in %s" % (t["name"], app["name"]))
                seen.add(t["name"])
                if not t.get("description") or "inputSchema" not in t:
                    errors.append("incomplete tool %s__%s" % (app["name"], t["name"]))
                tools["%s__%s" % (app["name"], t["name"])] = t
    with open(os.path.join(HERE, QUERIES), encoding="utf-8") as f:
        queries = json.load(f)
    counts = collections.Counter()
    seen_q = set()
    for q in queries:
        text, exp, kind = q.get("query"), q.get("expected"), q.get("kind")
        if kind not in KINDS:
            errors.append("unknown kind %r: %s" % (kind, text))
        counts[kind] += 1
        key = " ".join(text.lower().split())
        if key in seen_q:
            errors.append("duplicate query: " + text)
        seen_q.add(key)
        if not isinstance(exp, list):
            errors.append("expected is not a list: " + text)
            continue
        if (kind == "none") != (not exp):
            errors.append("expected does not match kind %s: %s" % (kind, text))
        for name in exp:
            if name not in tools:
                errors.append("unknown expected tool %s: %s" % (name, text))
        if kind == "paraphrase":
            for name in exp:
                t = tools.get(name)
                if t:
                    shared = content_stems(text) & content_stems(t["name"] + " " + t["description"])
                    if shared:
                        warnings.append("paraphrase shares %s with %s: %s" % (sorted(shared), name, text))
        if kind == "param":
            for name in exp:
                t = tools.get(name)
                if t:
                    qs = content_stems(text)
                    only = (qs & content_stems(param_text(t["inputSchema"]))) - content_stems(
                        t["name"] + " " + t["description"])
                    if not only:
                        warnings.append("param query has no parameter-only word for %s: %s" % (name, text))
    print("catalogues: %d apps, %d tools" % (len(apps), len(tools)))
    print("| kind | queries |\n|---|---|")
    for k in KINDS:
        print("| %s | %d |" % (k, counts[k]))
    print("| **total** | **%d** |" % len(queries))
    for w in warnings:
        print("warning:", w)
    for e in errors:
        print("error:", e)
    if errors:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
