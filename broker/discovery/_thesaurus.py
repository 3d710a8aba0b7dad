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
music and video, spreadsheets, code, terminals, chat, slides, PDF, 3D, settings and windows),
written from general knowledge rather than from any one app's tool names, and kept to
synonyms and near-synonyms: every extra word is extra noise. A group is symmetric (each member
finds the others). :data:`BROADER` is one-way: a specific word finds its broader terms
(``purple`` -> ``color``, ``fbx`` -> ``model``) but a broad word does not fan out to every
specific one.

:data:`PHRASES` maps fixed multi-word expressions ("black and white", "out of office", "turn
the volume down") to the words they stand for. A key's words must follow each other, except
at ``~``, where up to :data:`_GAP` other words may come between (phrasal verbs split by their
object: "turn *the music* down"). The words of a matched phrase that its meaning does not
repeat are taken out of the query (:func:`rewrite`): "get rid of", "fast forward" or "thumbs
up" do not ask for ``get``, ``forward`` or ``thumbs``, and they are not expanded one by one.

Lookups use a light normalisation (:func:`_variants`: plural and -ing/-ed endings) so the table
lists each word once; FTS5's porter stemmer takes care of the rest at match time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["GROUPS", "BROADER", "PHRASES", "expand", "rewrite", "synonyms", "words"]

GROUPS: Final[tuple[str, ...]] = (
    # files and storage
    "file document doc",
    "folder directory dir subfolder",
    "delete remove erase discard trash cancel eliminate purge",
    "clear wipe empty reset",
    "copy duplicate clone replicate",
    "move relocate transfer",
    "create new add insert",
    "open launch load",
    "close exit quit dismiss",
    "save store export",
    "size space storage disk usage",
    "disk drive",
    "zip compress archive pack tar gzip",
    "unzip extract decompress unpack untar",
    "checksum hash digest",
    "permission access chmod executable rights privileges",
    "trash bin recycle wastebasket",
    # not "look": "it looks odd" is no search ("look up" and "look for" are phrases below)
    "search find locate lookup grep query",
    "show display view list reveal",
    "big bigger large larger enlarge increase raise boost grow",
    "small smaller shrink reduce decrease lower lessen",
    "start begin launch initiate",
    "stop halt end finish cease",
    "change modify adjust edit alter update tweak amend revise",
    "fix repair correct resolve",
    "get fetch retrieve obtain read",
    "count number tally",
    "replace substitute swap",
    "rename retitle relabel",
    "info information details properties metadata attributes",
    "modified modification edited",
    "default usual standard",
    "app application program software",
    "blank empty untitled",
    "restore recover undelete",
    "backup backups",
    "settings preferences options configuration config configure",
    "enable activate",
    "disable deactivate",
    "toggle switch",
    "verify validate confirm",
    "import ingest",
    "type enter",
    "recent latest newest",
    "current active",
    "hidden invisible",
    "password passcode passphrase",
    "login signin logon",
    "shortcut hotkey keybinding",
    "stuck hung frozen unresponsive",
    "print printout printer",
    "paste clipboard",
    "window pane panel",
    "fullscreen maximize",
    "collapse fold",
    "encrypt encryption encrypted",
    "protect secure safeguard",
    "tag label category",
    "thumbnail preview",
    "sync synchronize synchronise",
    "extension addon plugin",
    "monitor screen",
    "network internet connection online",
    "restart reboot",
    "shutdown poweroff",
    "install setup",
    "uninstall deinstall",
    "translate translation",
    "speed pace tempo",
    "block blocklist blacklist ban",
    "optimize optimise",
    # images
    "image picture photo photograph pic img graphic snapshot",
    "grayscale greyscale monochrome desaturate gray grey",
    "blur soften defocus blurry fuzzy",
    "sharpen sharp crisp crisper sharpness",
    "resize scale dimension dimensions rescale",
    "width wide breadth",
    "height tall",
    "crop trim",
    "rotate turn straighten spin tilt",
    "flip mirror reflect",
    "brightness bright dark lighten darken exposure dim brighter",
    "contrast",
    "saturation vivid vibrant colorful saturate",
    "color colour hue tint shade tone",
    "transparent transparency opacity alpha",
    "heal retouch blemish spot pimple scratch",
    "draw paint sketch brush stroke",
    "select pick choose",
    "highlighted selected selection",
    "caption subtitle subtitles",
    "undo revert rollback undid",
    "redo redid reapply",
    "layer layers",
    # mail
    "email mail message inbox mailbox",
    "reply answer respond response",
    "send post dispatch",
    "compose write draft",
    "attachment attached attach enclosure",
    # not "away": a chat status, "throw away", "put away" ("out of office" is a phrase below)
    "vacation holiday absence leave",
    "autoreply autoresponder responder",
    "rule filter",
    "automatic automatically auto automated",
    "spam junk",
    "contact addressbook",
    "recipient addressee",
    "flag flagged starred important urgent priority",
    # calendar
    "meeting event appointment booking",
    "book reserve",
    "invite invitation rsvp",
    "agenda schedule calendar diary planner",
    "task todo chore",
    "remind reminder alert alarm",
    "recurring repeat repeating recurrence",
    "free available availability",
    "timezone zone",
    "reschedule postpone defer delay",
    "attendee participant guest invitee",
    "decline reject refuse",
    "accept approve",
    "deadline due",
    "busy occupied unavailable",
    "colleague coworker teammate",
    # web
    "website site webpage web url link homepage hyperlink",
    "browse navigate surf visit",
    "bookmark favorite favourite",
    "history visited",
    "cookie cookies",
    "cache cached",
    "private incognito anonymous",
    "screenshot capture snapshot screengrab screencap",
    "zoom magnify magnification",
    "refresh reload",
    "back previous backward backwards prior",
    "click press tap",
    "article content",
    "fill populate",
    "download downloads",
    # music and video
    "song track tune melody",
    "music audio sound playback",
    "skip next",
    "volume loudness loud quiet louder quieter softer",
    # not "random": a random password or the #random channel is no shuffle
    "shuffle randomize",
    "loop repeat replay",
    "radio station stream streaming",
    "rate rating stars",
    "equalizer eq bass treble",
    "pause suspend",
    "resume continue unpause",
    "seek scrub rewind",
    "artist singer band musician performer",
    "video movie film clip footage",
    "lyrics",
    # spreadsheets
    "spreadsheet workbook sheet worksheet",
    "chart graph plot diagram visualization visualize",
    "pivot summarize aggregate summary crosstab",
    "freeze lock",
    "duplicate duplicates repeated dupe",
    "sort order arrange alphabetize alphabetical",
    "highlight emphasize mark marker",
    "sum total subtotal",
    "average mean",
    "calculate compute calculation",
    "formula equation",
    "percent percentage",
    # code
    "commit checkin",
    "test tests testing",
    "debug debugger debugging",
    "reference references usage usages used callers",
    "definition declaration declared defined",
    "error errors warning warnings diagnostics problems lint linter bug bugs issue issues",
    "format formatter reformat indentation indent prettify tidy beautify",
    "refactor refactoring",
    "package library dependency module",
    "build compile",
    "function method routine",
    "variable symbol identifier",
    "diff changes changed modifications difference compare uncommitted",
    "project workspace codebase repository repo",
    "autocomplete completion intellisense",
    "snippet snippets",
    "deploy release publish",
    "macro script",
    "stash shelve",
    # terminal
    "terminal shell console cli",
    "run execute exec",
    "kill terminate interrupt abort",
    "ssh remote server host",
    "output printed stdout scrollback",
    "transcript log",
    "theme appearance scheme skin look",
    "environment env",
    # chat
    "channel room",
    "conversation thread discussion",
    "direct dm privately",
    "react reaction emoji emoticon",
    "mute silence snooze",
    "notification notifications notify",
    "upload share",
    "status presence",
    "mention ping",
    "announce announcement broadcast",
    "topic subject",
    # slides
    "presentation deck slides slideshow",
    "present presenting slideshow",
    "notes speaker presenter",
    "theme design template",
    "background backdrop wallpaper",
    "transition effect",
    "reorder rearrange",
    # pdf
    "merge combine join concatenate",
    "split separate divide",
    "ocr recognize scanned scan",
    "sign signature autograph",
    "comment annotation annotate note remark",
    "outline contents toc",
    "chapter section",
    "contain contains include occur occurrence appear",
    # 3d
    "object mesh model shape geometry",
    "material shader texture",
    "shiny glossy metallic metal reflective",
    "light lamp lighting illuminate",
    "keyframe animate animation",
    "smooth subdivision subdivide",
    "unwrap uv",
    "camera viewpoint perspective",
    "face faces polygon poly",
    "vertex vertices",
    "rig rigging armature skeleton bones",
    "bevel chamfer",
    # text
    "uppercase upper capital capitals caps capitalize",
    "wrap wrapping",
    "paragraph passage",
    "align alignment justify",
    "heading headline",
    "footnote endnote",
    "margin margins",
    "redact censor",
    "watermark stamp",
    "font typeface",
    "spelling spellcheck typo misspelling",
    "cursor caret",
)

#: A specific word -> its broader terms (one way: ``color`` does not find ``purple``).
BROADER: Final[dict[str, tuple[str, ...]]] = {
    **dict.fromkeys("red green blue yellow purple violet orange pink magenta cyan brown teal".split(),
                    ("color", "hue")),
    **dict.fromkeys("jpg jpeg png gif bmp tiff tif webp heic svg psd raw".split(), ("image",)),
    **dict.fromkeys("mp3 flac wav aac ogg m4a".split(), ("audio", "track")),
    **dict.fromkeys("mp4 mkv avi mov webm".split(), ("video",)),
    **dict.fromkeys("docx odt rtf txt markdown md".split(), ("document", "text")),
    **dict.fromkeys("xlsx xls ods csv tsv".split(), ("spreadsheet", "workbook")),
    **dict.fromkeys("pptx ppt odp".split(), ("presentation", "slides")),
    **dict.fromkeys("rar 7z gz tgz".split(), ("archive", "zip")),
    **dict.fromkeys("fbx obj stl gltf glb 3ds dae".split(), ("model", "mesh")),
    **dict.fromkeys("ics ical".split(), ("calendar", "events")),
    **dict.fromkeys("cube sphere cylinder cone torus plane pyramid".split(), ("primitive", "mesh", "object")),
    **dict.fromkeys("gold silver copper bronze chrome steel wood glass plastic".split(), ("material", "metallic")),
    **dict.fromkeys("daily weekly monthly yearly annual annually biweekly fortnightly".split(),
                    ("recurring", "repeat")),
    **dict.fromkeys("standup huddle".split(), ("meeting",)),
    **dict.fromkeys("logo icon clipart illustration".split(), ("image", "picture")),
    **dict.fromkeys("fade dissolve".split(), ("transition",)),
    **dict.fromkeys("heart upvote".split(), ("react", "reaction", "emoji")),
    **dict.fromkeys("minute minutes timestamp".split(), ("position", "time")),
    **dict.fromkeys("megabytes gigabytes kilobytes mb gb kb bytes".split(), ("size",)),
    **dict.fromkeys("currency decimal decimals".split(), ("format", "number")),
    **dict.fromkeys("percent percentage".split(), ("format", "number")),
    **dict.fromkeys("reschedule postpone".split(), ("change", "update", "time")),
    "caption": ("text", "label"),
    **dict.fromkeys("bold italic underline underlined strikethrough".split(), ("format", "font", "style")),
    **dict.fromkeys("birthday anniversary conference".split(), ("event",)),
    **dict.fromkeys("vlookup xlookup hlookup".split(), ("formula", "lookup")),
    "ls": ("list", "directory"),
    "mkdir": ("create", "folder", "directory"),
    "rm": ("delete", "remove"),
    "rmdir": ("delete", "folder", "directory"),
    "mv": ("move", "rename"),
    "cp": ("copy",),
    "pwd": ("current", "directory"),
    "cd": ("directory", "change"),
    "ps": ("process", "list"),
    "cls": ("clear", "screen"),
    "gif": ("image", "animation"),
    "lowercase": ("lower", "case"),
    "tick": ("click", "check"),
    "checkbox": ("click", "check"),
    "podcast": ("audio", "track"),
    "album": ("music", "library"),
    "notepad": ("text", "editor", "document"),
    "browser": ("web", "page"),
    "excel": ("spreadsheet", "workbook"),
    "powerpoint": ("presentation", "slides"),
    "newsletter": ("mail", "message"),
    "badge": ("unread", "notification"),
}

#: Multi-word expressions -> the words they stand for; ``~`` allows a few words in between.
PHRASES: Final[dict[str, tuple[str, ...]]] = {
    "black and white": ("grayscale", "desaturate", "monochrome"),
    "out of office": ("vacation", "auto", "reply"),
    "do not disturb": ("mute", "notifications", "disturb"),
    "to do": ("task",),
    "command line": ("terminal", "shell", "command"),
    "address book": ("contact",),
    "email address": ("contact", "email", "address"),
    "upside down": ("flip", "rotate", "vertical"),
    "on its side": ("rotate", "side"),
    "turn ~ up": ("increase", "louder", "volume"),
    "turn ~ down": ("decrease", "quieter", "volume"),
    "turn ~ on": ("enable", "on"),
    "turn ~ off": ("disable", "off"),
    "switch ~ on": ("enable", "on"),
    "switch ~ off": ("disable", "off"),
    "fast forward": ("seek", "skip", "position"),
    "get rid": ("delete", "remove"),
    "throw ~ away": ("delete", "discard", "trash"),
    "throw ~ out": ("delete", "discard", "trash"),
    "clean up": ("clear", "delete", "tidy"),
    "look up": ("search", "find"),
    "look for": ("search", "find"),
    "set up": ("configure", "create", "set"),
    "sign in": ("login",),
    "log in": ("login",),
    "sign up": ("register", "signup"),
    "zoom in": ("zoom", "magnify", "enlarge"),
    "zoom out": ("zoom", "shrink"),
    "back up": ("backup", "copy"),
    "touch ~ up": ("retouch", "heal", "edit"),
    "side by side": ("split", "side"),
    "next to each other": ("split", "side"),
    "thumbs up": ("react", "reaction", "emoji"),
    "thumbs down": ("react", "reaction", "emoji"),
    "pass ~ on": ("forward",),
    "write back": ("reply",),
    "fill in": ("fill", "form"),
    "fill out": ("fill", "form"),
    "bring ~ back": ("restore", "recover", "undo"),
    "bring ~ in": ("import", "load"),
    "break ~ into": ("split", "separate"),
    "break ~ up": ("split", "separate"),
    "mix ~ up": ("shuffle", "random"),
    "sum up": ("sum", "total"),
    "catch up": ("read", "unread"),
    "caught up": ("read", "unread"),
    "right now": ("immediately",),
    "at once": ("immediately",),
    "how big": ("size",),
    "how large": ("size",),
    "how much space": ("size", "space"),
    "how many": ("count", "number"),
    "full screen": ("fullscreen", "maximize"),
    "screen shot": ("screenshot", "capture"),
    "print screen": ("screenshot", "capture"),
    "dark mode": ("theme", "dark"),
    "night mode": ("theme", "dark"),
    "time zone": ("timezone",),
    "address bar": ("url", "address"),
    "reader mode": ("readable", "article", "text"),
    "shut down": ("shutdown", "close"),
    "pull out": ("extract",),
    "speed up": ("speed", "faster"),
    "slow down": ("speed", "slower"),
    "table of contents": ("outline", "contents", "toc"),
    "upper case": ("uppercase", "upper", "case"),
    "lower case": ("lowercase", "lower", "case"),
    "title case": ("case", "title", "capitalize"),
    "find and replace": ("replace", "find"),
    "search and replace": ("replace", "search"),
    "word count": ("count", "words"),
    "key frame": ("keyframe",),
    "play next": ("queue", "next"),
    "up next": ("queue", "next"),
    "now playing": ("current", "playing"),
    "ctrl c": ("interrupt", "kill", "copy"),
    "ctrl z": ("undo",),
    "ctrl y": ("redo",),
    "ctrl v": ("paste",),
    "ctrl s": ("save",),
    "ctrl f": ("find", "search"),
    "without ~ trace": ("private", "incognito"),
    "change ~ name": ("rename", "name"),
    "step back": ("back", "undo", "previous"),
    "go back": ("back", "previous"),
    "go forward": ("forward", "next"),
    "go to": ("navigate", "go"),
    "jump to": ("go", "navigate"),
}

#: How many other words may come between the parts of a phrase at a ``~``.
_GAP: Final = 3


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
    for word, broader in BROADER.items():
        bucket = related.setdefault(word, [])
        bucket.extend(m for m in broader if m != word and m not in bucket)
    return {word: tuple(others) for word, others in related.items()}


def _parse(key: str) -> tuple[tuple[str, bool], ...]:
    """A phrase key as (word, may follow a gap) pairs."""
    parts: list[tuple[str, bool]] = []
    gap = False
    for token in key.split():
        if token == "~":
            gap = True
            continue
        parts.append((token, gap))
        gap = False
    return tuple(parts)


_RELATED: Final = _build()
# Phrases without a gap first, longer ones first: "turn it upside down" is "upside down", and
# "turn ~ down" may not take a word a fixed phrase has taken.
_PHRASES: Final = tuple(sorted(((_parse(key), meaning) for key, meaning in PHRASES.items()),
                               key=lambda item: (any(gap for _, gap in item[0]), -len(item[0]))))


def _find(phrase: tuple[tuple[str, bool], ...], sequence: list[str], taken: set[int],
          forms: list[frozenset[str]] | None = None) -> list[int] | None:
    """Positions of ``phrase``'s words in ``sequence`` (earliest start) not in ``taken``, or None.
    ``forms``: each word's :func:`_variants`, computed once per query by the caller."""
    if forms is None:
        forms = [frozenset(_variants(word)) for word in sequence]
    for start in range(len(sequence)):
        if start in taken or phrase[0][0] not in forms[start]:
            continue
        positions = [start]
        for part, gap in phrase[1:]:
            last = positions[-1]
            reach = range(last + 1, min(len(sequence), last + 2 + (_GAP if gap else 0)))
            found = next((i for i in reach if i not in taken and part in forms[i]), None)
            if found is None:
                break
            positions.append(found)
        else:
            return positions
    return None


def rewrite(words: Iterable[str], all_words: list[str] | None = None) -> tuple[list[str], list[str]]:
    """The query words to search as they are, and the related words to search at a discount.

    ``all_words`` is the query's full word sequence (stop words included) for phrase lookup.
    The words of a matched phrase that its meaning does not repeat are dropped from the first
    list and not expanded; the phrase's meaning is added to the second.
    """
    original = list(dict.fromkeys(words))
    sequence = all_words or original
    idiom: set[str] = set()
    meanings: list[str] = []
    taken: set[int] = set()
    forms = [frozenset(_variants(word)) for word in sequence]
    present = frozenset().union(*forms)
    for phrase, meaning in _PHRASES:
        if any(part not in present for part, _ in phrase):  # most phrases: skipped at once
            continue
        positions = _find(phrase, sequence, taken, forms)
        if positions is None:
            continue
        taken.update(positions)
        idiom.update(sequence[i] for i in positions if sequence[i] not in meaning)
        meanings.extend(meaning)
    kept = [w for w in original if w not in idiom]
    seen = set(kept)
    extra: list[str] = []

    def add(other: str) -> None:
        if other not in seen:
            seen.add(other)
            extra.append(other)

    for word in kept:
        for variant in _variants(word):
            for other in _RELATED.get(variant, ()):
                add(other)
    for other in meanings:
        add(other)
    return kept, extra


def expand(words: Iterable[str], all_words: list[str] | None = None) -> list[str]:
    """Words related to ``words`` that are not among them, in a stable order.

    ``all_words`` is the query's full word sequence (stop words included) for phrase lookup.
    """
    return rewrite(words, all_words)[1]


def words() -> frozenset[str]:
    """Every word the thesaurus knows (group members, broader terms, phrase words), for the
    index's typo correction: a misspelt query word may be one only the thesaurus has."""
    known: set[str] = set(_RELATED)
    for related in _RELATED.values():
        known.update(related)
    for key, meaning in PHRASES.items():
        known.update(part for part in key.split() if part != "~")
        known.update(meaning)
    return frozenset(w for w in known if w.isalpha())


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    related: dict[str, list[str]] = {}
    for group in GROUPS:
        members = group.split()
        for word in members:
            bucket = related.setdefault(word, [])
            bucket.extend(m for m in members if m != word and m not in bucket)
    return {word: tuple(others) for word, others in related.items()}


_SYNONYMS: Final = _build_synonyms()


def synonyms(word: str) -> tuple[str, ...]:
    """The other members of ``word``'s groups (not its broader terms: ``teal`` -> ``color``
    says little about which app a query is about)."""
    return _SYNONYMS.get(word, ())
