"""Query expansion: a small thesaurus of the words people use for desktop-app tasks.

Theory of operation
-------------------
People ask for "photos", "songs" and "directories"; apps describe "images", "tracks" and
"folders". BM25 only matches words that occur, so a query word is also searched through the
other members of its *group* here: words that mean the same thing in a desktop app (or a
close hyponym: ``jpg`` / ``image``). Expansion words are scored in a second FTS5 query and
their BM25 score counts at a fraction (``Weights.expansion``) of an original word's, so an
exact match still wins.

The groups are general desktop-software vocabulary (files, images, mail, calendars, the web,
music, spreadsheets, code, terminals, chat, slides, PDF, 3D), written once and kept small on
purpose: every extra word is extra noise. :data:`PHRASES` maps fixed multi-word expressions
("black and white", "out of office") that no single word stands for.

Lookups use a light normalisation (:func:`_variants`: plural and -ing/-ed endings) so the table
lists each word once; FTS5's porter stemmer takes care of the rest at match time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["GROUPS", "PHRASES", "expand"]

GROUPS: Final[tuple[str, ...]] = (
    # files and storage
    "file document doc",
    "folder directory dir",
    "delete remove erase discard trash cancel",
    "copy duplicate clone",
    "move relocate",
    "create new add insert",
    "open launch load",
    "close exit quit",
    "save store export",
    "size space storage disk usage",
    "zip compress archive",
    "unzip extract decompress unpack",
    "checksum hash digest",
    "permission access chmod executable",
    "trash bin recycle",
    "search find look locate lookup",
    "show display view list",
    "big bigger large larger enlarge increase",
    "small smaller shrink reduce decrease",
    "start begin launch",
    "stop halt end finish",
    "change modify adjust edit alter update",
    "get fetch retrieve obtain read",
    "count number tally",
    "replace substitute swap",
    "rename retitle",
    # images
    "image picture photo photograph pic img graphic jpg jpeg png",
    "grayscale greyscale monochrome desaturate gray grey",
    "blur soften defocus",
    "sharpen sharp crisp sharpness",
    "resize scale dimension",
    "crop trim",
    "rotate turn straighten",
    "flip mirror reflect",
    "brightness bright dark lighten darken exposure",
    "saturation vivid vibrant colorful",
    "color colour hue tint",
    "heal retouch blemish spot pimple scratch",
    "undo revert",
    "layer layers",
    # mail
    "email mail message inbox",
    "reply answer respond",
    "attachment attached",
    "vacation holiday away absence",
    "rule filter",
    "spam junk",
    "contact addressbook",
    # calendar
    "meeting event appointment",
    "invite invitation rsvp",
    "agenda schedule calendar diary",
    "task todo chore",
    "remind reminder alert alarm",
    "recurring repeat repeating recurrence",
    "free available availability",
    "timezone zone",
    # web
    "website site webpage page web url link",
    "bookmark favorite favourite",
    "history visited",
    "cookie cookies",
    "private incognito",
    "screenshot capture snapshot",
    "zoom magnify",
    "refresh reload",
    "back previous",
    "click press tap",
    "article content",
    "fill populate",
    # music
    "song track tune",
    "music audio playback",
    "skip next",
    "volume loudness loud quiet louder quieter",
    "shuffle random randomize",
    "loop repeat",
    "rate rating stars",
    "equalizer eq bass treble",
    # spreadsheets
    "spreadsheet workbook sheet worksheet",
    "chart graph plot diagram",
    "pivot summarize aggregate summary",
    "freeze lock",
    "duplicate duplicates repeated dupe",
    "sort order arrange alphabetize alphabetical",
    "highlight emphasize",
    # code
    "commit checkin",
    "test tests testing",
    "debug debugger debugging",
    "reference references usage usages used callers",
    "definition declaration declared defined",
    "error errors warning warnings diagnostics problems lint linter",
    "format formatter reformat indentation indent prettify tidy beautify",
    "refactor refactoring",
    "package library dependency module",
    "build compile",
    "function method routine",
    "variable symbol identifier",
    "diff changes changed modifications",
    # terminal
    "terminal shell console",
    "run execute exec",
    "kill terminate interrupt abort",
    "ssh remote server",
    "output printed stdout scrollback",
    "transcript log",
    "theme appearance scheme skin",
    # chat
    "channel room",
    "direct dm privately",
    "react reaction emoji",
    "mute silence snooze",
    "notification notifications",
    "upload share",
    # slides
    "presentation deck slides slideshow",
    "present presenting slideshow",
    "notes speaker presenter",
    "theme design template",
    "background backdrop",
    # pdf
    "merge combine join concatenate",
    "split separate divide",
    "ocr recognize scanned scan",
    "sign signature",
    "comment annotation annotate note",
    "outline contents toc",
    # 3d
    "object mesh model",
    "material shader texture",
    "shiny glossy metallic metal reflective",
    "light lamp lighting illuminate",
    "keyframe animate animation",
    "smooth subdivision subdivide",
    "unwrap uv",
    # text
    "uppercase upper capital capitals caps capitalize",
    "lowercase lower",
    "wrap wrapping",
)

#: Multi-word expressions -> the words they stand for.
PHRASES: Final[dict[tuple[str, ...], tuple[str, ...]]] = {
    ("black", "and", "white"): ("grayscale", "desaturate", "monochrome"),
    ("out", "of", "office"): ("vacation", "auto", "reply"),
    ("do", "not", "disturb"): ("mute", "notifications"),
    ("to", "do"): ("task",),
    ("command", "line"): ("terminal", "shell"),
    ("address", "book"): ("contact",),
}


def _variants(word: str) -> list[str]:
    """The word and its likely base forms (``photos`` -> ``photo``, ``zipping`` -> ``zip``)."""
    out = [word]
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        out.append(word[:-2])
    if word.endswith("s") and len(word) > 3:
        out.append(word[:-1])
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            stem = word[: -len(suffix)]
            out += [stem, stem + "e"]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                out.append(stem[:-1])
    return out


def _build() -> dict[str, tuple[str, ...]]:
    related: dict[str, list[str]] = {}
    for group in GROUPS:
        members = group.split()
        for word in members:
            bucket = related.setdefault(word, [])
            bucket.extend(m for m in members if m != word and m not in bucket)
    return {word: tuple(others) for word, others in related.items()}


_RELATED: Final = _build()


def expand(words: Iterable[str], all_words: list[str] | None = None) -> list[str]:
    """Words related to ``words`` that are not among them, in a stable order.

    ``all_words`` is the query's full word sequence (stop words included) for phrase lookup.
    """
    original = list(dict.fromkeys(words))
    seen = set(original)
    extra: list[str] = []
    for word in original:
        for variant in _variants(word):
            for other in _RELATED.get(variant, ()):
                if other not in seen:
                    seen.add(other)
                    extra.append(other)
    sequence = all_words or original
    for phrase, meaning in PHRASES.items():
        n = len(phrase)
        if any(tuple(sequence[i : i + n]) == phrase for i in range(len(sequence) - n + 1)):
            for other in meaning:
                if other not in seen:
                    seen.add(other)
                    extra.append(other)
    return extra
