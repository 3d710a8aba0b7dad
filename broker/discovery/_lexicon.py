"""Which words are real English words: typo correction never touches one.

Theory of operation
-------------------
A query word the index does not know is either a typo ("exprot") or a real word the tools
happen not to use ("parse", "came", "bank", "march"). Edit distance alone cannot tell them
apart ("parse" is one edit from "pause", "bank" from "back"), and correcting a real word
replaces what the user meant with something else. So a word is corrected only when it is
neither in the index nor in a general-language lexicon.

The lexicon is the English frequency dictionary that the maintained spelling library
``symspellpy`` ships inside its wheel (``frequency_dictionary_en_82_765.txt``: 82,765 words
from the intersection of SCOWL and Google Books n-grams, plurals and inflections included, no
common misspellings), read once, lazily, from the installed package: nothing is downloaded.
Reading it takes ~50 ms and ~8 MB, in whichever thread first asks (the daemon searches in a
worker thread); a lock makes the first read happen once. Without the package (a broken
install) the lexicon is empty and correction behaves as before: every unknown word may be
corrected.
"""

from __future__ import annotations

import importlib.resources
import threading
from typing import Final

__all__ = ["is_word", "lexicon_size"]

#: The package shipping the dictionary, and the file.
_PACKAGE: Final = "symspellpy"
_DICTIONARY: Final = "frequency_dictionary_en_82_765.txt"

_lock = threading.Lock()
_words: frozenset[str] | None = None


def _load() -> frozenset[str]:
    global _words
    with _lock:
        if _words is None:
            try:
                text = importlib.resources.files(_PACKAGE).joinpath(_DICTIONARY).read_text("utf-8")
            except (ImportError, OSError):
                text = ""
            _words = frozenset(line.split(" ", 1)[0] for line in text.splitlines() if line)
        return _words


def is_word(word: str) -> bool:
    """Whether ``word`` (lower case) is a word of the English lexicon."""
    words = _words if _words is not None else _load()
    return word in words


def lexicon_size() -> int:
    """How many words the lexicon holds (0: the dictionary did not load)."""
    return len(_words if _words is not None else _load())
