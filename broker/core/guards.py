"""Argument guards: checks every call passes after validation and before any I/O.

Theory of operation
-------------------
The path-traversal guard walks every string in the arguments, values and keys, through nested
objects and lists at any depth (an explicit stack, not recursion), and rejects ``..`` used as a
path segment with either separator. Before looking, each string is brought to the form an app
could end up with after any amount of lax decoding:

* Unicode compatibility forms are folded (NFKC: fullwidth ``．．／``, the two-dot leader ``‥``,
  small ``﹒``, fullwidth ``％`` and hex digits), as are slash look-alikes that Windows'
  "best fit" code-page conversion turns into real separators (``∕ ⁄ ⧵``), and NUL (which C
  string APIs treat as the end of the string);
* percent-escapes are decoded to their fixed point, any number of layers deep (``%2e``,
  ``%252e``, ``%25252e``, ...), IIS-style ``%u002e`` included, and so are escapes that only
  appear once an inner one is decoded (``%%32e``) or once a decoded character is folded
  (``%EF%BC%85`` is ``％``, which folds to ``%``);
* overlong UTF-8 forms of ASCII characters that lax decoders accept (``%c0%ae``,
  ``%e0%80%ae``, ``%f0%80%80%ae``, and the 5- and 6-byte forms) become the character.

The decoding is one left-to-right pass with a stack (:func:`_decode_run`), linear in the length
of the string, so deep nesting costs no more than shallow: see the comment there for why one
pass reaches the fixed point. A plain ``..`` inside a word ("wait..." or "1..10") is not a path
segment and passes. Absolute paths are not traversal and pass: tools that take paths must still
check them against what they mean to allow.

Cost: an ordinary string (ASCII, no ``%``, no ``..``, no NUL) costs one scan; other strings cost
NFKC plus a regex; only the ``%`` runs are decoded, in C when one round of decoding is
provably final, else by the stack pass in Python (about 0.3 µs a character). The guard is pure
and keeps no state, so a caller may run :func:`find_path_traversal` in a worker thread for very
large arguments (see ``bench/guards.py`` and BENCHMARKS.md for what it costs).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

# ".." bounded on each side by the string's edge or a path separator. Written to start with the
# literal ".." (the lookbehind comes after it), so the regex engine skips ahead to each ".." in
# C: about 13x faster on long text than "(?:^|[\\/])\.\.(?:[\\/]|$)", which means the same.
_DOT_DOT_SEGMENT = re.compile(r"\.\.(?<![^\\/]\.\.)(?![^\\/])")
#: A stretch that percent-decoding can change: a '%' and the escape characters after it. An
#: escape is made only of these characters, so decoding one stretch never reaches another.
_ESCAPE_RUN = re.compile(r"%[%0-9A-Fa-fUu]*")
#: Separator look-alikes that NFKC keeps but Windows' best-fit conversion maps to ASCII; and NUL.
_LOOKALIKES = {"\u2215": "/", "\u2044": "/", "\u29f8": "/", "\u2216": "\\", "\u29f5": "\\", "\u29f9": "\\",
               "\x00": "/"}
_LOOKALIKE = re.compile("[" + "".join(_LOOKALIKES) + "]")


def _unlookalike(text: str) -> str:
    # str.translate walks non-ASCII text a character at a time in Python-object land (0.4 s
    # for 3.8 MB); a search in C and a replace per look-alike actually present costs ~nothing.
    if _LOOKALIKE.search(text) is None:
        return text
    for lookalike, plain in _LOOKALIKES.items():
        text = text.replace(lookalike, plain)
    return text
#: One complete escape: without any, there is nothing to decode.
_ESCAPE = re.compile(r"%(?:[0-9A-Fa-f]{2}|[uU][0-9A-Fa-f]{4})")
#: ``%`` followed by encoded '%' signs: the same as one '%' (decoding order does not matter,
#: see _decode_run), collapsed in C first so the most common deep nesting costs nothing.
_PERCENT_CHAIN = re.compile(r"%(?:25|[uU]0025)+")
#: Bytes that may start an overlong form (C0, C1, F8-FD; E0 80/81 and F0 80 and F0 81 too).
_OVERLONG_START = re.compile(rb"[\xc0\xc1\xf8-\xfd]|\xe0[\x80\x81]|\xf0[\x80\x81]")
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_PERCENT = 0x25


def _fold(text: str) -> str:
    if not unicodedata.is_normalized("NFKC", text):  # the check is ~30x cheaper than the fold
        text = unicodedata.normalize("NFKC", text)
    return _unlookalike(text)


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    # Folding is idempotent character by character: every character of _fold(c) folds to itself
    # (checked over the whole Unicode database by a test), so a folded result never folds again.
    return _fold(char)


def _utf8_length(lead: int) -> int:
    """The sequence length a lead byte announces, lax: 5- and 6-byte forms count (0 if not a lead)."""
    if 0xC0 <= lead < 0xE0:
        return 2
    if 0xE0 <= lead < 0xF0:
        return 3
    if 0xF0 <= lead < 0xF8:
        return 4
    if 0xF8 <= lead < 0xFC:
        return 5
    if 0xFC <= lead < 0xFE:
        return 6
    return 0


def _end_of_character(out: bytearray, pending: list[int]) -> None:
    """``out`` just got a continuation byte: if it ends a character, fold or un-overlong it.

    An overlong form of an ASCII character (``c0 ae`` for ".", any length from 2 to 6 bytes:
    the whole family, not a list) becomes that character; a well-formed character whose folded
    form differs (``％`` -> ``%``, ``．`` -> ``.``, ``㋉`` -> ``10月``) is replaced by the folded
    form. Either replacement goes back through ``pending``, so it can complete an escape.
    """
    size = len(out)
    for back in range(2, min(size, 6) + 1):
        lead = out[-back]
        if 0x80 <= lead < 0xC0:
            continue  # another continuation byte: look further back
        if _utf8_length(lead) != back:
            return  # ASCII, an incomplete sequence, or one too long for its lead: not ours
        value = lead & (0x7F >> back)
        for byte in out[size - back + 1:]:
            value = (value << 6) | (byte & 0x3F)
        if value < 0x80:  # overlong ASCII: what a lax decoder makes of it
            del out[-back:]
            pending.append(value)
        elif back <= 4 and value >= (0x80, 0x800, 0x10000)[back - 2] and value <= 0x10FFFF \
                and not 0xD800 <= value < 0xE000:
            char = chr(value)
            folded = _fold_char(char)
            if folded != char:
                del out[-back:]
                pending.extend(reversed(folded.encode("utf-8")))
        return


def _decode_run(run: str) -> str:
    """Decode one escape run (``%`` then escape characters) to its fixed point, in one pass.

    Why one pass is enough: every byte goes onto ``out`` (a stack) and the only things that
    can change are at its top, so each is checked as soon as it is complete: ``%XX`` and
    ``%uXXXX`` escapes (the decoded byte or character is pushed back through ``pending`` and
    checked in turn, so ``%25`` + ``2e`` and ``%`` + ``%32`` + ``e`` both become ``.``),
    overlong forms and characters that fold (:func:`_end_of_character`). Escapes cannot
    overlap ('%' is neither a hex digit nor 'u'), so the order in which they are decoded does
    not change the result: this pass reaches the same fixed point as decoding the whole string
    round after round until nothing changes, without the rounds.

    Why it ends, in time linear in ``len(run)``: each escape decoded removes one '%' and at
    least two other bytes, and the only characters that are or fold to '%' (U+0025, U+FF05,
    U+FE6A; checked over the Unicode database by a test) take a whole escape to write, so the
    '%' it puts back is paid for by the escape it consumed. An overlong form or a folded
    character is folded once: the folded form folds to itself. So the number of steps is
    bounded by a small multiple of the input's length, whatever the nesting.
    """
    out = bytearray()
    pending = list(run.encode("ascii"))
    pending.reverse()
    while pending:
        byte = pending.pop()
        out.append(byte)
        if byte in _HEX_DIGITS:
            size = len(out)
            if size >= 3 and out[-3] == _PERCENT and out[-2] in _HEX_DIGITS:
                value = int(out[-2:], 16)
                del out[-3:]
                pending.append(value)
            elif size >= 6 and out[-6] == _PERCENT and out[-5] in b"uU" \
                    and all(b in _HEX_DIGITS for b in out[-4:-1]):
                point = int(out[-4:], 16)
                del out[-6:]
                char = "\ufffd" if 0xD800 <= point < 0xE000 else chr(point)
                pending.extend(reversed(char.encode("utf-8")))
        elif 0x80 <= byte < 0xC0:
            _end_of_character(out, pending)
    return _unlookalike(out.decode("utf-8", "replace"))


def _decode_run_fast(run: str) -> str | None:
    """One round in C when it is provably the last: else None (use :func:`_decode_run`).

    It is the last when no '%' is left (nothing can start another escape), no overlong form
    can be in the bytes, and folding the result makes no '%' either.
    """
    # Only %XX escapes, back to back? (Checked with string methods: a regex is 10x slower.)
    if len(run) % 3 or run.count("%") != len(run) // 3 or run[::3].strip("%"):
        return None  # %u escapes or stray characters: the general pass
    try:
        raw = bytes.fromhex(run.replace("%", ""))
    except ValueError:
        return None  # 'u' or 'U' where a hex digit should be
    if _PERCENT in raw or _OVERLONG_START.search(raw):
        return None
    text = raw.decode("utf-8", "replace")
    if not text.isascii():
        text = _fold(text)
        if "%" in text:
            return None
    return _unlookalike(text)


def _decode_match(match: re.Match[str]) -> str:
    run = match.group()
    if len(run) < 3:
        return run  # a lone '%' or '%' and one character: no escape fits
    if "25" in run:
        run = _PERCENT_CHAIN.sub("%", run)
    decoded = _decode_run_fast(run)
    return decoded if decoded is not None else _decode_run(run)


def _normalise(text: str) -> str:
    text = _fold(text)
    if _ESCAPE.search(text) is None:
        return text
    return _ESCAPE_RUN.sub(_decode_match, text)


def _is_traversal(text: str) -> bool:
    if ".." not in text and "%" not in text and "\x00" not in text and text.isascii():
        return False  # the fast path for ordinary strings
    if "%" not in text and "\x00" not in text and text.isascii():
        return bool(_DOT_DOT_SEGMENT.search(text))  # ASCII folds to itself: nothing to decode
    return bool(_DOT_DOT_SEGMENT.search(_normalise(text)))


def _has_traversal(value: Any) -> bool:
    """Whether :func:`find_path_traversal` would find something (no paths built: the common,
    clean case costs one walk and no string formatting). Iterative: any depth."""
    if isinstance(value, str):
        return _is_traversal(value)
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _is_traversal(key):
                    return True
                if isinstance(item, str):
                    if _is_traversal(item):
                        return True
                elif isinstance(item, dict | list):
                    stack.append(item)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    if _is_traversal(item):
                        return True
                elif isinstance(item, dict | list):
                    stack.append(item)
    return False


def find_path_traversal(arguments: Any) -> str | None:
    """Return the argument path (``$.files[2].name``) of the first traversal found, else None.

    Pure and thread-safe: it may run in a worker thread.
    """
    return _find_path(arguments) if _has_traversal(arguments) else None


#: A place in the arguments: (its parent's place, its own step such as ``.key`` or ``[3]``).
#: A chain, so a deep structure costs one small tuple per level, not one path string per level.
_Place = tuple["_Place | None", str]


def _path_of(place: _Place) -> str:
    steps: list[str] = []
    node: _Place | None = place
    while node is not None:
        steps.append(node[1])
        node = node[0]
    return "".join(reversed(steps))


def _find_path(arguments: Any) -> str | None:
    """The first traversal in document order, depth first (keys before their values)."""
    root: _Place = (None, "$")
    stack: list[tuple[_Place, Any]] = [(root, arguments)]
    while stack:
        place, value = stack.pop()
        if isinstance(value, str):
            if _is_traversal(value):
                return _path_of(place)
        elif isinstance(value, dict):
            items = list(value.items())
            for key, _item in items:
                if isinstance(key, str) and _is_traversal(key):
                    return _path_of((place, f".{key}"))
            for key, item in reversed(items):
                stack.append(((place, f".{key}"), item))
        elif isinstance(value, list):
            for index in range(len(value) - 1, -1, -1):
                stack.append(((place, f"[{index}]"), value[index]))
    return None
