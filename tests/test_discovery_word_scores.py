"""Each word's BM25 scores kept between searches (``broker.discovery._word_scores``)."""

from __future__ import annotations

import sqlite3

from app_client.wire import ToolSpec
from broker.discovery import ToolIndex, match_expression, query_words
from broker.discovery._index import _TOOL_SCORES
from broker.discovery._word_scores import WordScores
from test_discovery import load_bench


def hits(index: ToolIndex, query: str) -> list[tuple[str, float]]:
    return [(hit.agent_name, hit.score) for hit in index.search(query, 20)]


def test_the_sum_of_each_words_scores_is_one_query_of_all_of_them_to_the_last_bit() -> None:
    bench = load_bench()
    index = ToolIndex()
    index.replace_all(bench.load_corpus())
    db: sqlite3.Connection = index._db
    columns = index.weights.columns()
    scores = WordScores(db)
    queries = [query for query, _ in bench.load_queries(bench.QUERIES)]
    compared = 0
    for query in queries * 2:  # the second time every word's scores are kept ones
        words = query_words(query)
        expression = match_expression(words)
        if expression is None:
            continue
        whole = {name: -float(score) for name, score in db.execute(_TOOL_SCORES, (*columns, expression))}
        assert scores.summed(_TOOL_SCORES, columns, words, 1.0) == whole, query
        compared += 1
    assert compared > 100


def test_scores_kept_before_a_change_are_not_used_after_it() -> None:
    # Every score depends on the whole table: a new tool changes each word's IDF and the
    # average length, a removed one too. Without clearing, the second search would reuse
    # the first one's scores and differ from a fresh index over the same tools.
    tools = [
        ("Paint__CropImage", "Paint", ToolSpec(name="CropImage", description="Crop the picture to a rectangle")),
        ("Paint__ExportImage", "Paint", ToolSpec(name="ExportImage", description="Write the picture to a file")),
        ("Files__Open", "Files", ToolSpec(name="Open", description="Open a file")),
    ]
    more = ("Files__CopyFile", "Files", ToolSpec(name="CopyFile", description="Copy a file or a picture file"))
    index = ToolIndex()
    index.replace_all(tools)
    before = hits(index, "picture file")
    index.add(*more)
    fresh = ToolIndex()
    fresh.replace_all([*tools, more])
    assert hits(index, "picture file") == hits(fresh, "picture file") != before
    index.remove("Files__CopyFile")
    assert hits(index, "picture file") == before


def test_at_most_max_rows_scores_are_kept_the_least_recently_used_word_dropped_first() -> None:
    index = ToolIndex()
    index.replace_all([(f"App__Tool{i}", "App", ToolSpec(name=f"Tool{i}", description=f"word{i % 3} common"))
                       for i in range(9)])
    scores = WordScores(index._db, max_rows=12)
    columns = index.weights.columns()
    common = scores.summed(_TOOL_SCORES, columns, ["common"], 1.0)
    assert len(common) == 9  # kept: 9 rows
    scores.summed(_TOOL_SCORES, columns, ["word0"], 1.0)  # 3 more: 12, at the bound
    assert scores._rows == 12
    scores.summed(_TOOL_SCORES, columns, ["word1"], 1.0)  # 3 more: "common" (least recent) goes
    assert scores._rows == 6
    assert [key[2] for key in scores._kept] == ["word0", "word1"]
    scores.clear()
    assert scores._rows == 0 and not scores._kept
