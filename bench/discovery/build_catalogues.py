"""Writes two new catalogues for discovery round 5 (issue 32): ``catalogue_studio.json`` and
``catalogue_home.json``, in corpus.json's format.

Written before the round's query sets and before any change of the ranking. Apps are made up
but modelled on real desktop apps, with short descriptions as real apps have them, and with
near-duplicate tools across apps (``Undo``, ``Export...``, ``Search...``, ``Mute...``,
``Record...``, ``Crop...``) so that the app has to be inferred from the query. Some words are
only in a parameter's description (``bpm``, ``LUFS``, ``fps``, ``stars``), as in real schemas.

    python3 bench/discovery/build_catalogues.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (name, description, {param: (type, description[, enum])}, read_only)
Tool = tuple[str, str, dict[str, tuple[Any, ...]], bool]

STUDIO: dict[str, list[Tool]] = {
    "BeatForge": [  # a DAW
        ("PlayProject", "Start playback from the playhead.", {}, False),
        ("StopPlayback", "Stop playback and return the playhead to where it started.", {}, False),
        ("SetTempo", "Change the project tempo.", {"value": ("number", "Beats per minute (bpm), 20-300.")}, False),
        ("AddTrack", "Add an audio or instrument track.", {"kind": ("string", "Track type.", ["audio", "instrument", "bus"])}, False),
        ("DeleteTrack", "Remove a track and its clips.", {"track": ("integer", "Track number.")}, False),
        ("MuteTrack", "Silence a track without deleting it.", {"track": ("integer", "Track number.")}, False),
        ("SoloTrack", "Hear only this track.", {"track": ("integer", "Track number.")}, False),
        ("ArmTrackRecording", "Arm a track and start recording into it.", {"track": ("integer", "Track number.")}, False),
        ("SetTrackVolume", "Set a track's fader level.", {"track": ("integer", "Track number."), "db": ("number", "Gain in decibels.")}, False),
        ("ExportMixdown", "Render the whole project to an audio file.", {"format": ("string", "File format.", ["wav", "mp3", "flac"])}, False),
        ("AddMarker", "Put a named marker at the playhead.", {"label": ("string", "Marker text.")}, False),
        ("QuantizeClip", "Snap the notes of a MIDI clip to the grid.", {"grid": ("string", "Note value, e.g. 1/16.")}, False),
        ("TransposeClip", "Shift a clip's pitch up or down.", {"semitones": ("integer", "Half steps, negative is down.")}, False),
        ("SetLoopRegion", "Loop playback between two positions.", {"start": ("number", "Start bar."), "end": ("number", "End bar.")}, False),
        ("ToggleMetronome", "Turn the click track on or off.", {}, False),
        ("Undo", "Undo the last edit.", {}, False),
        ("ListPlugins", "List installed effect and instrument plugins.", {}, True),
        ("AddEffect", "Insert an effect plugin on a track.", {"track": ("integer", "Track number."), "plugin": ("string", "Plugin name, e.g. reverb, compressor, EQ.")}, False),
    ],
    "ClipCut": [  # a video editor
        ("ImportMedia", "Add video, audio or image files to the project bin.", {"paths": ("array", "Files to import.")}, False),
        ("SplitClip", "Cut the clip under the playhead in two.", {}, False),
        ("TrimClip", "Shorten a clip from its start or end.", {"clip": ("string", "Clip id."), "seconds": ("number", "How much to remove.")}, False),
        ("AddTransition", "Put a transition between two clips.", {"style": ("string", "Transition.", ["crossfade", "dip to black", "wipe"])}, False),
        ("AddTitle", "Overlay a text title on the timeline.", {"text": ("string", "Title text.")}, False),
        ("ExportVideo", "Render the timeline to a video file.", {"resolution": ("string", "Output size.", ["720p", "1080p", "4k"]), "fps": ("number", "Frames per second.")}, False),
        ("SetClipSpeed", "Speed up or slow down a clip.", {"percent": ("number", "100 is normal speed; 50 is slow motion.")}, False),
        ("DetachAudio", "Separate a clip's sound into its own audio clip.", {"clip": ("string", "Clip id.")}, False),
        ("ColorCorrect", "Adjust exposure, contrast and white balance of a clip.", {"exposure": ("number", "Stops."), "temperature": ("number", "Kelvin.")}, False),
        ("StabilizeClip", "Reduce camera shake in a clip.", {"clip": ("string", "Clip id.")}, False),
        ("ImportSubtitles", "Load a subtitle file (SRT) onto the timeline.", {"path": ("string", "SRT file.")}, False),
        ("CropVideo", "Crop the frame of a clip.", {"aspect": ("string", "Aspect ratio.", ["16:9", "9:16", "1:1", "4:3"])}, False),
        ("PlayTimeline", "Preview the timeline from the playhead.", {}, False),
        ("MuteClip", "Silence a clip's audio.", {"clip": ("string", "Clip id.")}, False),
        ("AddKeyframe", "Add a keyframe for a clip property at the playhead.", {"property": ("string", "Property.", ["opacity", "scale", "position", "volume"])}, False),
        ("Undo", "Undo the last edit.", {}, False),
        ("ReverseClip", "Play a clip backwards.", {"clip": ("string", "Clip id.")}, False),
    ],
    "PixelNest": [  # a photo library
        ("ImportPhotos", "Import photos from a folder, camera or phone.", {"source": ("string", "Folder or device.")}, False),
        ("RatePhoto", "Give a photo a rating.", {"photo": ("string", "Photo id."), "rating": ("integer", "Stars, 0 to 5.")}, False),
        ("TagPeople", "Name the faces found in a photo.", {"photo": ("string", "Photo id."), "names": ("array", "Person names.")}, False),
        ("FindPhotos", "Find photos by date, place, person or keyword.", {"query": ("string", "What to look for.")}, True),
        ("CreateAlbum", "Make a new album from selected photos.", {"name": ("string", "Album name.")}, False),
        ("DeletePhoto", "Move photos to the trash.", {"photos": ("array", "Photo ids.")}, False),
        ("ExportPhotos", "Save copies of photos as files.", {"format": ("string", "Format.", ["jpeg", "png", "tiff"]), "quality": ("integer", "JPEG quality 1-100.")}, False),
        ("RotatePhoto", "Rotate a photo by 90 degrees.", {"direction": ("string", "Direction.", ["left", "right"])}, False),
        ("CropPhoto", "Crop a photo to a region or aspect ratio.", {"aspect": ("string", "Aspect ratio, e.g. 4:5.")}, False),
        ("AutoEnhance", "Improve light and colour of a photo in one step.", {}, False),
        ("ShowOnMap", "Show where photos were taken on a map.", {}, True),
        ("StartSlideshow", "Play the selected photos full screen, one after another.", {"seconds": ("number", "Seconds per photo.")}, False),
        ("RemoveRedEye", "Fix red eyes from a flash.", {"photo": ("string", "Photo id.")}, False),
        ("FindDuplicates", "List photos that look the same.", {}, True),
        ("MarkFavorite", "Add a photo to Favorites.", {"photo": ("string", "Photo id.")}, False),
        ("EditCaption", "Set a photo's caption.", {"photo": ("string", "Photo id."), "caption": ("string", "Text.")}, False),
    ],
    "VectorPad": [  # vector drawing
        ("DrawShape", "Draw a shape on the canvas.", {"shape": ("string", "Shape.", ["rectangle", "ellipse", "polygon", "star", "line"])}, False),
        ("SetFill", "Set the fill colour of the selection.", {"color": ("string", "Hex code like #ff8800.")}, False),
        ("SetStroke", "Set the outline colour and width of the selection.", {"color": ("string", "Hex code."), "width": ("number", "Points.")}, False),
        ("GroupObjects", "Group the selected objects.", {}, False),
        ("AlignObjects", "Line up the selected objects.", {"edge": ("string", "Edge.", ["left", "center", "right", "top", "middle", "bottom"])}, False),
        ("AddText", "Place a text box.", {"text": ("string", "Text.")}, False),
        ("ExportSvg", "Save the drawing as SVG.", {"path": ("string", "File path.")}, False),
        ("ExportPng", "Save the drawing as a PNG image.", {"path": ("string", "File path."), "scale": ("number", "1 = 72 dpi.")}, False),
        ("UniteShapes", "Merge the selected shapes into one outline.", {}, False),
        ("ZoomToFit", "Zoom so the whole drawing is visible.", {}, False),
        ("Undo", "Undo the last edit.", {}, False),
        ("AddLayer", "Add a layer above the current one.", {"name": ("string", "Layer name.")}, False),
        ("LockLayer", "Prevent changes to a layer.", {"name": ("string", "Layer name.")}, False),
        ("ConvertTextToPaths", "Turn text into editable outlines.", {}, False),
        ("FlipHorizontal", "Mirror the selection left to right.", {}, False),
        ("SetCorners", "Round the corners of a rectangle.", {"radius": ("number", "Corner radius in points.")}, False),
    ],
    "PodRec": [  # podcast recording
        ("StartRecording", "Start recording all microphones.", {}, False),
        ("StopRecording", "Stop recording and save the take.", {}, False),
        ("InviteGuest", "Send a guest a link to join the recording remotely.", {"email": ("string", "Guest's address.")}, False),
        ("NormalizeLoudness", "Bring the episode to a standard loudness.", {"target": ("number", "Target in LUFS, e.g. -16.")}, False),
        ("RemoveSilence", "Shorten long pauses.", {"min_gap": ("number", "Pauses longer than this many seconds.")}, False),
        ("ExportEpisode", "Render the episode to an audio file.", {"format": ("string", "Format.", ["mp3", "wav", "m4a"])}, False),
        ("PublishEpisode", "Upload the episode to the podcast host.", {"title": ("string", "Episode title."), "notes": ("string", "Show notes.")}, False),
        ("AddChapter", "Add a chapter mark at the playhead.", {"title": ("string", "Chapter title.")}, False),
        ("ReduceNoise", "Remove hiss and background hum.", {"strength": ("number", "0 to 1.")}, False),
        ("TranscribeEpisode", "Make a text transcript of the episode.", {"language": ("string", "Spoken language.")}, False),
        ("MuteMicrophone", "Silence one speaker's microphone.", {"speaker": ("string", "Speaker name.")}, False),
        ("ListEpisodes", "List recorded and published episodes.", {}, True),
    ],
    "FontShelf": [  # a font manager
        ("InstallFont", "Install a font file for all apps.", {"path": ("string", "Font file (.ttf, .otf).")}, False),
        ("UninstallFont", "Remove an installed font.", {"family": ("string", "Font family.")}, False),
        ("PreviewFont", "Show sample text in a font.", {"family": ("string", "Font family."), "text": ("string", "Sample text.")}, True),
        ("FindFonts", "Search installed fonts by name, style or classification (serif, script, monospace).", {"query": ("string", "What to look for.")}, True),
        ("ActivateCollection", "Turn on a saved set of fonts.", {"name": ("string", "Collection name.")}, False),
        ("CompareFonts", "Show two or more fonts side by side.", {"families": ("array", "Font families.")}, True),
        ("FindMissingFonts", "List fonts a document uses that are not installed.", {"path": ("string", "Document.")}, True),
    ],
}

HOME: dict[str, list[Tool]] = {
    "LedgerLite": [  # personal finance
        ("AddTransaction", "Record income or an expense.", {"amount": ("number", "Amount, negative for spending."), "payee": ("string", "Who was paid."), "date": ("string", "ISO date.")}, False),
        ("ImportStatement", "Import a bank or card statement file (CSV, OFX, QIF).", {"path": ("string", "Statement file.")}, False),
        ("CategorizeTransaction", "Assign a category such as groceries or rent.", {"transaction": ("string", "Id."), "category": ("string", "Category.")}, False),
        ("ShowBudget", "Show budgeted against actual spending per category for a month.", {"month": ("string", "YYYY-MM.")}, True),
        ("SetBudget", "Set the monthly amount for a category.", {"category": ("string", "Category."), "amount": ("number", "Per month.")}, False),
        ("ListAccounts", "List accounts with their balances.", {}, True),
        ("ReconcileAccount", "Match recorded transactions against the statement balance.", {"account": ("string", "Account.")}, False),
        ("ExportReport", "Save an income and expense report as PDF or CSV.", {"period": ("string", "Month, quarter or year."), "format": ("string", "Format.", ["pdf", "csv"])}, False),
        ("SearchTransactions", "Find transactions by payee, amount, memo or date.", {"query": ("string", "What to look for.")}, True),
        ("SplitTransaction", "Split one transaction across several categories.", {"transaction": ("string", "Id."), "parts": ("array", "Category and amount pairs.")}, False),
        ("ScheduleBill", "Add a recurring bill with reminders before it is due.", {"payee": ("string", "Who."), "every": ("string", "Interval.", ["week", "month", "year"])}, False),
        ("ShowNetWorth", "Chart assets minus debts over time.", {}, True),
        ("TrackInvestments", "Show holdings and their value from the latest stock prices.", {}, True),
    ],
    "NoteKeep": [  # notes
        ("CreateNote", "Create a new note.", {"title": ("string", "Title."), "body": ("string", "Text.")}, False),
        ("SearchNotes", "Find notes containing words.", {"query": ("string", "Words.")}, True),
        ("TagNote", "Add a tag to a note.", {"note": ("string", "Id."), "tag": ("string", "Tag.")}, False),
        ("PinNote", "Keep a note at the top of the list.", {"note": ("string", "Id.")}, False),
        ("DeleteNote", "Move a note to the trash.", {"note": ("string", "Id.")}, False),
        ("ExportNote", "Save a note as Markdown, PDF or HTML.", {"note": ("string", "Id."), "format": ("string", "Format.", ["markdown", "pdf", "html"])}, False),
        ("ShareNote", "Share a note with someone by link.", {"note": ("string", "Id."), "email": ("string", "Address.")}, False),
        ("AddChecklist", "Insert a checklist into a note.", {"items": ("array", "Lines.")}, False),
        ("SetNoteReminder", "Be reminded about a note at a time.", {"note": ("string", "Id."), "at": ("string", "Date and time.")}, False),
        ("MoveToNotebook", "Move a note to another notebook.", {"note": ("string", "Id."), "notebook": ("string", "Notebook.")}, False),
        ("Undo", "Undo the last edit.", {}, False),
        ("RecordVoiceNote", "Record audio into a note.", {}, False),
    ],
    "VaultBox": [  # a password manager
        ("AddLogin", "Save a username and password for a website.", {"url": ("string", "Site."), "username": ("string", "User."), "password": ("string", "Password.")}, False),
        ("GeneratePassword", "Create a strong random password.", {"length": ("integer", "Characters."), "symbols": ("boolean", "Include punctuation.")}, False),
        ("SearchVault", "Find saved logins, cards and notes.", {"query": ("string", "Words.")}, True),
        ("CopyPassword", "Copy a login's password to the clipboard (cleared after 30 s).", {"item": ("string", "Id.")}, False),
        ("LockVault", "Lock the vault; the master password is needed again.", {}, False),
        ("PasswordHealth", "List weak, reused and leaked passwords.", {}, True),
        ("ExportVault", "Export every item to an encrypted file.", {"path": ("string", "File.")}, False),
        ("ShareItem", "Share an item with a family member.", {"item": ("string", "Id."), "member": ("string", "Who.")}, False),
        ("AddOneTimeCode", "Add two-factor codes (TOTP) to a login.", {"item": ("string", "Id."), "secret": ("string", "Setup key.")}, False),
        ("AddCard", "Save a payment card.", {"number": ("string", "Card number."), "expiry": ("string", "MM/YY.")}, False),
    ],
    "BookNook": [  # an ebook reader
        ("OpenBook", "Open a book from the library.", {"title": ("string", "Title.")}, False),
        ("GoToPage", "Jump to a page or chapter.", {"page": ("integer", "Page number.")}, False),
        ("AddBookmark", "Bookmark the current page.", {}, False),
        ("HighlightText", "Highlight the selected passage, with an optional note.", {"color": ("string", "Colour."), "note": ("string", "Note.")}, False),
        ("SearchBook", "Find words in the open book.", {"query": ("string", "Words.")}, True),
        ("SetFontSize", "Make the text bigger or smaller.", {"points": ("number", "Size.")}, False),
        ("ToggleNightMode", "Switch between light and dark pages.", {}, False),
        ("DefineWord", "Look up the selected word in the dictionary.", {"word": ("string", "Word.")}, True),
        ("ReadAloud", "Read the book aloud with a synthetic voice.", {"rate": ("number", "Words per minute.")}, False),
        ("ListLibrary", "List the books in the library.", {"sort": ("string", "Order.", ["title", "author", "recent"])}, True),
        ("ShowReadingStats", "Show reading time and progress.", {}, True),
    ],
    "TripMap": [  # maps
        ("SearchPlace", "Find a place, address or business.", {"query": ("string", "What to look for.")}, True),
        ("GetDirections", "Plan a route between two places.", {"from": ("string", "Start."), "to": ("string", "Destination."), "mode": ("string", "How you travel.", ["driving", "walking", "cycling", "transit"])}, True),
        ("SavePlace", "Save a place to your lists.", {"place": ("string", "Place id."), "list": ("string", "List.")}, False),
        ("ShowTraffic", "Show current traffic on the map.", {}, True),
        ("MeasureDistance", "Measure the straight-line distance between points.", {"points": ("array", "Coordinates.")}, True),
        ("DownloadOfflineArea", "Keep a map region for use without internet.", {"region": ("string", "Area.")}, False),
        ("ShareLocation", "Send your current position to a contact.", {"contact": ("string", "Who.")}, False),
        ("SetHomeAddress", "Set your home address.", {"address": ("string", "Address.")}, False),
    ],
    "MailDesk": [  # email
        ("ComposeEmail", "Write a new email.", {"to": ("array", "Recipients."), "subject": ("string", "Subject."), "body": ("string", "Text.")}, False),
        ("ReplyEmail", "Reply to a message.", {"message": ("string", "Id."), "all": ("boolean", "Reply to all.")}, False),
        ("ForwardEmail", "Forward a message.", {"message": ("string", "Id."), "to": ("array", "Recipients.")}, False),
        ("SearchMail", "Find messages by sender, subject or words.", {"query": ("string", "Words.")}, True),
        ("ArchiveEmail", "Move messages out of the inbox.", {"messages": ("array", "Ids.")}, False),
        ("SetAutoReply", "Turn on an out-of-office reply.", {"message": ("string", "Reply text."), "until": ("string", "End date.")}, False),
        ("FlagEmail", "Flag a message for follow-up.", {"message": ("string", "Id.")}, False),
        ("CreateRule", "Sort incoming mail automatically by a condition.", {"condition": ("string", "When."), "action": ("string", "What to do.")}, False),
        ("BlockSender", "Send a sender's future messages to junk.", {"address": ("string", "Address.")}, False),
        ("ScheduleSend", "Send a draft later.", {"draft": ("string", "Id."), "at": ("string", "Date and time.")}, False),
        ("MarkAsRead", "Mark messages as read.", {"messages": ("array", "Ids.")}, False),
        ("AddSignature", "Set the text added below every email.", {"text": ("string", "Signature.")}, False),
        ("Undo", "Undo the last action.", {}, False),
    ],
    "ChatHub": [  # team chat
        ("SendMessage", "Post a message to a channel or person.", {"to": ("string", "Channel or person."), "text": ("string", "Message.")}, False),
        ("SearchMessages", "Find messages in all channels.", {"query": ("string", "Words.")}, True),
        ("SetStatus", "Set your presence and status text.", {"presence": ("string", "Presence.", ["available", "away", "busy", "do not disturb"]), "text": ("string", "Status text.")}, False),
        ("StartCall", "Start a voice or video call.", {"with": ("array", "People."), "video": ("boolean", "With camera.")}, False),
        ("ShareScreen", "Show your screen in the current call.", {}, False),
        ("CreateChannel", "Create a channel.", {"name": ("string", "Name."), "private": ("boolean", "Invite only.")}, False),
        ("MuteChannel", "Stop notifications from a channel.", {"channel": ("string", "Channel.")}, False),
        ("ReactToMessage", "Add an emoji reaction to a message.", {"message": ("string", "Id."), "emoji": ("string", "Emoji.")}, False),
        ("PinMessage", "Pin a message to the channel.", {"message": ("string", "Id.")}, False),
        ("UploadFile", "Share a file in a conversation.", {"path": ("string", "File."), "to": ("string", "Channel.")}, False),
    ],
    "TaskBoard": [  # tasks and kanban
        ("CreateTask", "Add a task.", {"title": ("string", "Title."), "due": ("string", "Due date.")}, False),
        ("CompleteTask", "Mark a task done.", {"task": ("string", "Id.")}, False),
        ("AssignTask", "Give a task to someone.", {"task": ("string", "Id."), "person": ("string", "Who.")}, False),
        ("SetDueDate", "Change when a task is due.", {"task": ("string", "Id."), "due": ("string", "Date.")}, False),
        ("MoveCard", "Move a card to another column.", {"task": ("string", "Id."), "column": ("string", "Column, e.g. Doing.")}, False),
        ("AddLabel", "Label a task.", {"task": ("string", "Id."), "label": ("string", "Label.")}, False),
        ("SearchTasks", "Find tasks by words, label or person.", {"query": ("string", "Words.")}, True),
        ("ArchiveBoard", "Archive a whole board.", {"board": ("string", "Board.")}, False),
        ("StartTimer", "Track time spent on a task.", {"task": ("string", "Id.")}, False),
        ("AddSubtask", "Break a task into smaller steps.", {"task": ("string", "Id."), "title": ("string", "Title.")}, False),
    ],
}


def schema(params: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, (kind, description, *rest) in params.items():
        prop: dict[str, Any] = {"type": kind, "description": description}
        if kind == "array":
            prop["items"] = {"type": "string"}
        if rest:
            prop["enum"] = rest[0]
        properties[name] = prop
    return {"type": "object", "properties": properties}


def catalogue(apps: dict[str, list[Tool]]) -> dict[str, Any]:
    out = []
    for app, tools in apps.items():
        rows = []
        for name, description, params, read_only in tools:
            tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema(params)}
            if read_only:
                tool["annotations"] = {"readOnlyHint": True}
            rows.append(tool)
        out.append({"name": app, "tools": rows})
    return {"apps": out}


def main() -> None:
    for name, apps in (("catalogue_studio.json", STUDIO), ("catalogue_home.json", HOME)):
        (HERE / name).write_text(json.dumps(catalogue(apps), indent=1) + "\n")


if __name__ == "__main__":
    main()
