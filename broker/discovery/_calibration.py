"""How sure a search answer is: each hit's ``confidence`` and the answer's "no tool clearly fits".

Theory of operation
-------------------
A search always answers with tools (never empty), so the answer has to say how far to trust
them. Two small logistic models, fitted on the development sets by
``bench/discovery/fit.py`` (their coefficients are pasted below, with the script's output in
BENCHMARKS.md), turn a few measurements into probabilities:

* the *hit* model: the probability that a hit is the right tool, from the cosine similarity
  of query and tool (semantic extra only), the share of the query's words the tool's name,
  title and description contain (``coverage``), whether it is the first hit, and the share of
  the query's words that no tool knows at all (``unknown``: "thermostat", "parcel");
* the *answer* model: the probability that some tool answers the query at all, from the best
  similarity among the first :data:`ANSWER_HITS` hits (semantic; the best, not the first's,
  since the app term of the fusion may put a less similar tool first) or the first hit's
  coverage, and ``unknown``.

A hit's ``confidence`` is ``high`` when the hit model says at least :data:`HIGH`, ``medium``
from :data:`MEDIUM`, else ``low``; the answer's ``noClearFit`` is true when the answer model
says less than the fitted threshold: an agent can then stop searching and say that no
connected app does this. The thresholds were chosen on the development sets (``high``: right
at least 90 % of the time there; "no clear fit": on at most 10 % of answerable queries); their
reliability on the held-out set is in BENCHMARKS.md. Each mode (with or without the semantic
extra) has its own coefficients, since only one of them has a similarity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import attrs

__all__ = ["Logistic", "hit_probability", "answer_probability", "level", "no_clear_fit", "HIGH", "MEDIUM", "ANSWER_HITS"]


@attrs.frozen
class Logistic:
    """``1 / (1 + exp(-(bias + sum(weight * (x - mean) / scale))))``."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float

    def __call__(self, features: Sequence[float]) -> float:
        z = self.bias + sum(w * (x - m) / s for w, x, m, s in zip(self.weights, features, self.mean, self.scale,
                                                                     strict=True))
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


# --- fitted by bench/discovery/fit.py --calibrate on the development sets (round 11: with the
# spent blind sets blind6 to blind10, 1,177 answerable and 165 no-answer queries, for the two
# models joined, the margin damping and a tool's similarity the higher of its text's and its
# params text's; see BENCHMARKS.md) ----------------------------------------------------------
#: hit model, semantic: (similarity, coverage, first, unknown)
HIT_SEMANTIC: Final = Logistic((0.5207, 0.1795, 0.2, 0.2233), (0.1062, 0.2287, 0.4, 0.2463),
                               (1.03, -0.0357, 1.2279, 0.1459), -2.5127)
#: hit model, BM25 only: (coverage, first, unknown)
HIT_LEXICAL: Final = Logistic((0.2174, 0.2191, 0.208), (0.2276, 0.4136, 0.236), (0.6382, 1.2381, -0.3718), -2.4963)
#: answer model, semantic: (best similarity among the first 5 hits, unknown)
ANSWER_SEMANTIC: Final = Logistic((0.6253, 0.2233), (0.1267, 0.2463), (1.3846, -0.3185), 0.7347)
#: answer model, BM25 only: (first hit's coverage, unknown)
ANSWER_LEXICAL: Final = Logistic((0.3492, 0.2233), (0.3055, 0.2463), (0.509, -0.7487), 0.3568)
#: A hit is ``high`` from this probability of being right, ``medium`` from the next (semantic, BM25 only).
HIGH: Final = {True: 0.70, False: 0.73}
MEDIUM: Final = {True: 0.09, False: 0.12}
#: The answer says no tool clearly fits below this probability that some tool answers.
NO_FIT_SEMANTIC: Final = 0.26
NO_FIT_LEXICAL: Final = 0.26
#: The answer model's similarity is the best among this many first hits (as fitted).
ANSWER_HITS: Final = 5


def hit_probability(similarity: float | None, coverage: float, first: bool, unknown: float) -> float:
    """The probability that a hit is the right tool (see the module docstring)."""
    if similarity is None:
        return HIT_LEXICAL((coverage, float(first), unknown))
    return HIT_SEMANTIC((similarity, coverage, float(first), unknown))


def answer_probability(similarity: float | None, coverage: float, unknown: float) -> float:
    """The probability that some tool answers the query, from its first hit."""
    if similarity is None:
        return ANSWER_LEXICAL((coverage, unknown))
    return ANSWER_SEMANTIC((similarity, unknown))


def level(probability: float, semantic: bool) -> str:
    """A hit's ``confidence`` for its probability of being right."""
    return "high" if probability >= HIGH[semantic] else "medium" if probability >= MEDIUM[semantic] else "low"


def no_clear_fit(probability: float, semantic: bool) -> bool:
    """Whether an answer whose tools answer the query with ``probability`` says no tool clearly fits."""
    return probability < (NO_FIT_SEMANTIC if semantic else NO_FIT_LEXICAL)
