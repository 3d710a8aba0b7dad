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

A tool whose author wrote typical requests (``exampleRequests``) matches more queries, by its
words and by its vector, so more queries look answerable: the answer model's threshold for
"no clear fit" is fitted apart for such tools (:data:`NO_FIT_WRITTEN`, again at 10 % of the
answerable queries of the development sets that have requests).
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


# --- fitted by bench/discovery/fit.py --calibrate on the development sets (round 15: with the
# spent blind sets blind6 to blind13, 1,552 answerable and 240 no-answer queries, for the two
# models joined, a tool's similarity the higher of its text's and its params text's, and the
# fusion refitted in round 12; see BENCHMARKS.md) ------------------------------------------------
#: hit model, semantic: (similarity, coverage, first, unknown)
HIT_SEMANTIC: Final = Logistic((0.5167, 0.1674, 0.2, 0.2395), (0.1051, 0.2222, 0.4, 0.251),
                               (0.9219, 0.0608, 1.2248, 0.1735), -2.5661)
#: hit model, BM25 only: (coverage, first, unknown)
HIT_LEXICAL: Final = Logistic((0.206, 0.2177, 0.2237), (0.2209, 0.4127, 0.2414), (0.665, 1.2451, -0.4137), -2.6428)
#: answer model, semantic: (best similarity among the first 5 hits, unknown)
ANSWER_SEMANTIC: Final = Logistic((0.6151, 0.2395), (0.1301, 0.251), (1.2441, -0.2259), 0.5370)
#: answer model, BM25 only: (first hit's coverage, unknown)
ANSWER_LEXICAL: Final = Logistic((0.3347, 0.2395), (0.3041, 0.251), (0.6018, -0.5897), 0.3010)
#: A hit is ``high`` from this probability of being right, ``medium`` from the next (semantic, BM25 only).
HIGH: Final = {True: 0.68, False: 0.67}
MEDIUM: Final = {True: 0.09, False: 0.16}
#: The answer says no tool clearly fits below this probability that some tool answers.
NO_FIT_SEMANTIC: Final = 0.25
NO_FIT_LEXICAL: Final = 0.27
#: The same for an answer whose deciding hit has typical requests (``exampleRequests``; semantic,
#: BM25 only): fitted on the development sets with requests (round 15: blind10 to blind13 and
#: round 5's development queries, requests written by helpers who saw only the catalogues).
NO_FIT_WRITTEN: Final = {True: 0.31, False: 0.51}
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


def no_clear_fit(probability: float, semantic: bool, written: bool = False) -> bool:
    """Whether an answer whose tools answer the query with ``probability`` says no tool clearly
    fits; ``written``: the hit the answer model read has typical requests (its own threshold)."""
    if written:
        return probability < NO_FIT_WRITTEN[semantic]
    return probability < (NO_FIT_SEMANTIC if semantic else NO_FIT_LEXICAL)
