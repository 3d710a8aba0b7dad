"""Write the two blind7 catalogues (standard library only, imports nothing from broker).

    python3 bench/discovery/blind7/make_blind7.py

catalogue_media.json: screen recorder, 3D sculpting, subtitle editor, media server,
pixel-art animation, game launcher. catalogue_ops.json: database GUI, API client, log viewer,
container dashboard, backup tool, network monitor, CI/CD pipelines.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def P(typ, desc, enum=None, items=None):
    p = {"type": typ, "description": desc}
    if enum:
        p["enum"] = enum
    if items:
        p["items"] = {"type": items}
    return p


def T(name, desc, params=None, required=()):
    schema = {"type": "object", "properties": params or {}}
    if required:
        schema["required"] = list(required)
    return {"name": name, "description": desc, "inputSchema": schema}


MEDIA = [
    {"name": "ReelCast", "tools": [
        T("start_recording", "Start capturing the screen, a window or a region, optionally with webcam and microphone.", {
            "source": P("string", "What to capture.", ["screen", "window", "region"]),
            "include_webcam": P("boolean", "Overlay the camera in a corner bubble."),
            "include_microphone": P("boolean", "Record narration from the selected input."),
            "fps": P("integer", "Frames per second, 15 to 60."),
        }, ["source"]),
        T("stop_recording", "Stop the current capture and save it to the library.", {
            "discard": P("boolean", "Throw the capture away instead of saving it."),
        }),
        T("pause_recording", "Pause the current capture without ending it; resuming continues the same file.", {
            "resume": P("boolean", "True to resume a paused capture."),
        }),
        T("take_screenshot", "Capture a still image of the screen, a window or a selected area.", {
            "area": P("string", "What to capture.", ["screen", "window", "region"]),
            "format": P("string", "Image format: PNG, JPEG or WebP."),
            "delay_seconds": P("integer", "Countdown before the capture, in seconds."),
            "copy_to_clipboard": P("boolean", "Also put the image on the clipboard."),
        }),
        T("trim_recording", "Cut the beginning or end off a recording.", {
            "recording_id": P("string", "Recording to edit."),
            "start": P("string", "Keep from this timestamp, hh:mm:ss."),
            "end": P("string", "Keep up to this timestamp, hh:mm:ss."),
        }, ["recording_id"]),
        T("annotate_recording", "Draw arrows, boxes or text over a recording, shown for a chosen time span.", {
            "recording_id": P("string", "Recording to edit."),
            "shape": P("string", "Annotation to add.", ["arrow", "box", "text", "spotlight"]),
            "text": P("string", "Label for text annotations."),
            "from_time": P("string", "Show from, hh:mm:ss."),
            "to_time": P("string", "Show until, hh:mm:ss."),
        }, ["recording_id", "shape"]),
        T("redact_region", "Blur or pixelate part of the frame, such as an email address or an open chat window, for the whole recording or a time range.", {
            "recording_id": P("string", "Recording to edit."),
            "rect": P("string", "Rectangle as x,y,width,height in pixels."),
            "style": P("string", "How to hide it.", ["blur", "pixelate", "black box"]),
        }, ["recording_id", "rect"]),
        T("add_captions", "Generate subtitles from the narration using speech recognition.", {
            "recording_id": P("string", "Recording to caption."),
            "language": P("string", "BCP 47 language code, e.g. en-US."),
            "burn_in": P("boolean", "Render the text into the pixels instead of a separate track (open captions)."),
        }, ["recording_id"]),
        T("export_recording", "Export a recording as a video file or an animated image.", {
            "recording_id": P("string", "Recording to export."),
            "format": P("string", "Container and codec: MP4 (H.264), WebM (VP9), ProRes 422 MOV or GIF."),
            "resolution": P("integer", "Output height in pixels: 480, 720, 1080 or 2160."),
            "path": P("string", "Where to write the file."),
        }, ["recording_id"]),
        T("share_link", "Upload a recording and get a link anyone can view.", {
            "recording_id": P("string", "Recording to upload."),
            "expires_in_days": P("integer", "Link stops working after this many days; 0 for never."),
            "password": P("string", "Viewers must enter this to watch."),
            "allow_download": P("boolean", "Let viewers download the file."),
        }, ["recording_id"]),
        T("schedule_recording", "Start and stop a capture automatically at set times.", {
            "start_at": P("string", "ISO 8601 date and time."),
            "duration_minutes": P("integer", "How long to record."),
            "source": P("string", "What to capture.", ["screen", "window", "region"]),
        }, ["start_at", "duration_minutes"]),
        T("set_hotkey", "Assign a keyboard shortcut to a recorder action.", {
            "action": P("string", "Action to bind.", ["start", "stop", "pause", "screenshot"]),
            "keys": P("string", "Key combination, e.g. Ctrl+Shift+R."),
        }, ["action", "keys"]),
        T("delete_recording", "Remove a recording from the library, and from the cloud if it was uploaded.", {
            "recording_id": P("string", "Recording to remove."),
            "keep_local_copy": P("boolean", "Only remove the uploaded copy."),
        }, ["recording_id"]),
        T("search_recordings", "Find recordings by title, date or words spoken in them.", {
            "query": P("string", "Words to look for."),
            "spoken": P("boolean", "Also match the automatic transcript."),
            "after": P("string", "Only recordings made after this date."),
        }, ["query"]),
        T("choose_audio_input", "Select which microphone and system sound are recorded.", {
            "microphone": P("string", "Input device name, e.g. a USB or XLR interface."),
            "system_audio": P("boolean", "Also record sound played by the computer."),
            "noise_suppression": P("boolean", "Filter out fan hum and keyboard clatter."),
        }),
    ]},
    {"name": "ClayForm", "tools": [
        T("new_sculpt", "Start a new sculpt from a primitive such as a sphere, cube or plane.", {
            "primitive": P("string", "Starting shape.", ["sphere", "cube", "plane", "cylinder", "head base mesh"]),
            "subdivisions": P("integer", "Initial subdivision level."),
        }),
        T("select_brush", "Pick the active sculpting brush and its size and strength.", {
            "brush": P("string", "Brush.", ["clay", "inflate", "smooth", "pinch", "crease", "grab", "flatten", "snake hook"]),
            "size": P("number", "Brush radius in screen pixels."),
            "strength": P("number", "0 to 1."),
        }, ["brush"]),
        T("set_symmetry", "Mirror strokes across one or more axes.", {
            "axes": P("string", "Any of X, Y, Z."),
            "radial_count": P("integer", "Number of radial copies around the axis; 0 for a plain mirror."),
        }),
        T("remesh", "Rebuild the mesh with an even distribution of polygons.", {
            "mode": P("string", "Method.", ["voxel", "quad", "dynamic topology"]),
            "resolution": P("number", "Voxel size, or target polycount for quad mode."),
        }),
        T("decimate_mesh", "Reduce the number of faces while keeping the shape.", {
            "target_ratio": P("number", "Fraction of faces to keep, e.g. 0.25."),
            "preserve_uv": P("boolean", "Keep UV seams intact."),
        }, ["target_ratio"]),
        T("subdivide", "Add a subdivision level for finer detail.", {
            "levels": P("integer", "How many levels to add."),
        }),
        T("mask_area", "Protect part of the model from brush strokes.", {
            "mode": P("string", "How to change the mask.", ["paint", "invert", "clear", "from cavity", "grow", "shrink"]),
            "blur": P("integer", "Soften the mask edge by this many passes."),
        }, ["mode"]),
        T("add_layer", "Add a sculpt layer so details can be adjusted or hidden separately.", {
            "name": P("string", "Layer name."),
            "opacity": P("number", "Strength of the layer, 0 to 1."),
        }),
        T("paint_vertices", "Paint colour directly onto the model's vertices.", {
            "color": P("string", "Hex colour, e.g. #aa3300."),
            "roughness": P("number", "PBR roughness, 0 to 1."),
            "metalness": P("number", "PBR metalness, 0 to 1."),
        }, ["color"]),
        T("bake_maps", "Bake detail from the high-resolution sculpt into texture maps for a low-poly model.", {
            "maps": P("array", "Any of normal, ambient occlusion, displacement, cavity.", items="string"),
            "size": P("integer", "Texture size in pixels: 1024, 2048 or 4096."),
            "low_poly": P("string", "Object that receives the maps."),
        }, ["maps"]),
        T("export_model", "Export the sculpt as a 3D file.", {
            "format": P("string", "OBJ, STL for 3D printing, FBX, glTF (GLB) or PLY."),
            "scale": P("number", "Scene units per centimetre."),
            "include_textures": P("boolean", "Write baked maps next to the file."),
            "path": P("string", "Where to write the file."),
        }, ["format"]),
        T("import_reference", "Place a reference image behind or beside the model.", {
            "path": P("string", "Image file."),
            "view": P("string", "Which view it belongs to.", ["front", "side", "top"]),
            "opacity": P("number", "0 to 1."),
        }, ["path"]),
        T("undo_stroke", "Undo the last brush stroke or operation.", {
            "steps": P("integer", "How many steps to go back."),
        }),
        T("rename_object", "Rename an object in the scene outline.", {
            "object": P("string", "Current name."),
            "new_name": P("string", "New name."),
        }, ["object", "new_name"]),
        T("make_hollow", "Hollow out the model with a given wall thickness and add drain holes.", {
            "thickness": P("number", "Wall thickness in millimetres."),
            "drain_holes": P("integer", "Number of holes so resin can escape."),
        }, ["thickness"]),
    ]},
    {"name": "SubStudio", "tools": [
        T("open_subtitles", "Open a subtitle file for editing.", {
            "path": P("string", "SRT, ASS/SSA, WebVTT or MicroDVD SUB file."),
            "encoding": P("string", "Text encoding, e.g. UTF-8 or Windows-1252."),
        }, ["path"]),
        T("add_cue", "Insert a new subtitle line with start and end times.", {
            "start": P("string", "hh:mm:ss,mmm"),
            "end": P("string", "hh:mm:ss,mmm"),
            "text": P("string", "Line text; use \\N for a line break."),
            "speaker": P("string", "Actor or speaker name."),
        }, ["start", "end", "text"]),
        T("split_cue", "Split one subtitle line into two at a time or character position.", {
            "cue": P("integer", "Line number."),
            "at": P("string", "Time hh:mm:ss,mmm or character index."),
        }, ["cue"]),
        T("merge_cues", "Join consecutive subtitle lines into one.", {
            "cues": P("array", "Line numbers to join.", items="integer"),
        }, ["cues"]),
        T("shift_timing", "Move every line, or a range of lines, earlier or later by a fixed amount.", {
            "offset_ms": P("integer", "Milliseconds; negative moves earlier."),
            "from_cue": P("integer", "First line to move."),
            "to_cue": P("integer", "Last line to move."),
        }, ["offset_ms"]),
        T("sync_to_audio", "Align subtitle timings to the speech in the video's soundtrack automatically.", {
            "video_path": P("string", "Video or audio file."),
            "max_shift_seconds": P("number", "Largest correction allowed."),
        }, ["video_path"]),
        T("change_framerate", "Convert timings between frame rates.", {
            "from_fps": P("number", "Source rate, e.g. 23.976 for NTSC film."),
            "to_fps": P("number", "Target rate, e.g. 25 for PAL."),
        }, ["from_fps", "to_fps"]),
        T("translate_subtitles", "Machine-translate every line into another language, keeping the timings.", {
            "target_language": P("string", "ISO 639-1 code, e.g. de or ja."),
            "engine": P("string", "Translation service.", ["DeepL", "Google", "local model"]),
        }, ["target_language"]),
        T("spell_check", "Check the subtitle text for spelling mistakes.", {
            "dictionary": P("string", "Language, e.g. en_GB."),
        }),
        T("style_subtitles", "Set the font, size, colour, outline and position of subtitles.", {
            "font": P("string", "Font family."),
            "size": P("number", "Point size."),
            "color": P("string", "Primary colour, hex."),
            "outline_px": P("number", "Border width in pixels."),
            "alignment": P("integer", "Numpad position 1-9, as in ASS; 8 is top centre."),
        }),
        T("check_reading_speed", "Flag lines that are shown too briefly for their length or are too long.", {
            "max_cps": P("number", "Maximum characters per second, e.g. 17."),
            "max_line_length": P("integer", "Characters per line, e.g. 42."),
            "min_gap_frames": P("integer", "Minimum gap between lines, in frames."),
        }),
        T("find_replace", "Find text in the subtitles and replace it.", {
            "find": P("string", "Text or pattern."),
            "replace": P("string", "Replacement."),
            "regex": P("boolean", "Treat find as a regular expression."),
            "match_case": P("boolean", "Case-sensitive."),
        }, ["find"]),
        T("export_subtitles", "Save the subtitles in another format.", {
            "format": P("string", "SRT, WebVTT, ASS, TTML, EBU STL or SCC (CEA-608 closed captions)."),
            "path": P("string", "Output file."),
        }, ["format"]),
        T("undo_edit", "Undo the last change to the subtitles.", {
            "steps": P("integer", "How many changes to undo."),
        }),
        T("play_preview", "Play the video with the subtitles overlaid, starting at a given line.", {
            "from_cue": P("integer", "Line to start at."),
            "speed": P("number", "Playback rate, e.g. 0.5 for half speed."),
        }),
    ]},
    {"name": "StreamShelf", "tools": [
        T("add_library", "Add a folder of movies, shows, music or photos to the server.", {
            "path": P("string", "Folder on the server."),
            "kind": P("string", "Content type.", ["movies", "shows", "music", "photos"]),
            "language": P("string", "Preferred metadata language."),
        }, ["path", "kind"]),
        T("scan_library", "Look for new, changed or removed files in a library and update it.", {
            "library": P("string", "Library name; all if omitted."),
        }),
        T("refresh_metadata", "Download posters, plot summaries and cast information again for items.", {
            "item": P("string", "Title or library."),
            "provider": P("string", "TMDb, TVDB or MusicBrainz."),
            "replace_images": P("boolean", "Overwrite artwork chosen by hand."),
        }, ["item"]),
        T("search_media", "Search movies, episodes and songs on the server by title, actor or genre.", {
            "query": P("string", "Words to look for."),
            "kind": P("string", "Limit to one content type."),
        }, ["query"]),
        T("create_user", "Add a person who can sign in and watch.", {
            "name": P("string", "Display name."),
            "pin": P("string", "Four-digit PIN for the profile."),
            "max_rating": P("string", "Highest content rating allowed, e.g. PG-13 or TV-14."),
            "libraries": P("array", "Libraries this person can see.", items="string"),
        }, ["name"]),
        T("set_transcoding", "Choose how videos are converted on the fly for devices that cannot play them directly.", {
            "hardware_acceleration": P("string", "NVENC, Quick Sync (QSV), VAAPI or none."),
            "max_bitrate_mbps": P("number", "Limit per stream in Mbit/s."),
            "tone_mapping": P("boolean", "Convert HDR to SDR when converting."),
        }),
        T("list_active_streams", "Show who is watching what right now, with device and playback method.", {}),
        T("stop_stream", "End someone's playback session, with an optional message.", {
            "session_id": P("string", "Session to end."),
            "message": P("string", "Shown on their screen."),
        }, ["session_id"]),
        T("create_collection", "Group titles into a collection such as a film series.", {
            "name": P("string", "Collection name."),
            "items": P("array", "Titles to include.", items="string"),
        }, ["name"]),
        T("mark_watched", "Mark a movie, episode or whole season as watched or unwatched for a user.", {
            "item": P("string", "Title, episode or season."),
            "watched": P("boolean", "False marks it unwatched."),
            "user": P("string", "Whose progress to change."),
        }, ["item"]),
        T("download_subtitles", "Fetch subtitles for a title from online providers.", {
            "item": P("string", "Movie or episode."),
            "language": P("string", "Language code."),
            "hearing_impaired": P("boolean", "Prefer SDH subtitles that describe sounds."),
        }, ["item", "language"]),
        T("enable_remote_access", "Let devices outside the home network connect to the server.", {
            "port": P("integer", "Public TCP port, default 8920."),
            "require_https": P("boolean", "Refuse unencrypted connections."),
        }),
        T("schedule_task", "Run a maintenance task at a set time.", {
            "task": P("string", "Task.", ["library scan", "thumbnail extraction", "database cleanup", "intro detection"]),
            "cron": P("string", "Cron expression, e.g. 0 3 * * *."),
        }, ["task", "cron"]),
        T("delete_media", "Remove an item from the library, and optionally delete its files from disk.", {
            "item": P("string", "Title, episode or season."),
            "delete_files": P("boolean", "Also delete the files."),
        }, ["item"]),
        T("share_library", "Give a friend's account access to one of your libraries.", {
            "email": P("string", "Friend's account email."),
            "library": P("string", "Library to share."),
            "allow_downloads": P("boolean", "Allow offline copies."),
        }, ["email", "library"]),
    ]},
    {"name": "FrameFlip", "tools": [
        T("new_canvas", "Create a new sprite with a given size and colour mode.", {
            "width": P("integer", "Pixels."),
            "height": P("integer", "Pixels."),
            "color_mode": P("string", "RGBA, grayscale or indexed."),
        }, ["width", "height"]),
        T("draw_pixels", "Draw with the pencil at a list of points.", {
            "points": P("array", "x,y pairs.", items="string"),
            "color": P("string", "Hex colour or palette index."),
            "size": P("integer", "Pencil size in pixels."),
        }, ["points"]),
        T("fill_area", "Flood fill a contiguous area with a colour.", {
            "x": P("integer", "Start column."),
            "y": P("integer", "Start row."),
            "color": P("string", "Hex colour or palette index."),
            "tolerance": P("integer", "0 to 255."),
        }, ["x", "y"]),
        T("add_frame", "Add a frame to the animation after the current one, empty or as a copy.", {
            "copy_current": P("boolean", "Duplicate the current frame's cels."),
            "duration_ms": P("integer", "How long this frame is shown, in milliseconds."),
        }),
        T("set_frame_duration", "Set how long frames are shown.", {
            "frames": P("string", "Frame range, e.g. 1-8."),
            "duration_ms": P("integer", "Milliseconds per frame."),
        }, ["duration_ms"]),
        T("toggle_onion_skin", "Show the previous and next frames faintly behind the current one.", {
            "before": P("integer", "Frames before."),
            "after": P("integer", "Frames after."),
            "opacity": P("number", "0 to 1."),
        }),
        T("tag_frames", "Name a range of frames as an animation such as walk or idle.", {
            "name": P("string", "Tag name."),
            "from_frame": P("integer", "First frame."),
            "to_frame": P("integer", "Last frame."),
            "direction": P("string", "forward, reverse or ping-pong."),
        }, ["name", "from_frame", "to_frame"]),
        T("load_palette", "Replace the colour palette with one from a file or a preset.", {
            "source": P("string", "GPL, ASE or PAL file, or a preset such as PICO-8 or DB32."),
        }, ["source"]),
        T("replace_color", "Swap one colour for another across the layer, the frame or the whole sprite.", {
            "from_color": P("string", "Colour to change."),
            "to_color": P("string", "New colour."),
            "scope": P("string", "Where.", ["layer", "frame", "sprite"]),
        }, ["from_color", "to_color"]),
        T("add_layer", "Add a new layer above the current one.", {
            "name": P("string", "Layer name."),
            "blend_mode": P("string", "normal, multiply, screen, overlay."),
        }),
        T("resize_sprite", "Scale the sprite by a factor or to a size.", {
            "scale": P("number", "Factor, e.g. 2 or 0.5."),
            "method": P("string", "Nearest neighbour keeps pixels crisp; RotSprite or bilinear otherwise."),
        }, ["scale"]),
        T("export_sprite_sheet", "Export the frames as one sheet image with a data file describing them.", {
            "layout": P("string", "horizontal, vertical or packed."),
            "padding": P("integer", "Pixels between frames."),
            "data_format": P("string", "JSON hash or array, as read by Unity, Godot or Phaser."),
        }),
        T("export_animation", "Export the animation as GIF, APNG or a numbered PNG sequence.", {
            "format": P("string", "GIF, APNG or PNG sequence."),
            "scale": P("integer", "Upscale factor."),
            "loop": P("boolean", "Loop forever."),
        }, ["format"]),
        T("undo", "Undo the last action.", {
            "steps": P("integer", "How many actions."),
        }),
        T("play_animation", "Play the animation in the editor, looping the current tag.", {
            "tag": P("string", "Animation tag to loop."),
        }),
    ]},
    {"name": "GameDock", "tools": [
        T("launch_game", "Start a game from the library.", {
            "game": P("string", "Title."),
            "arguments": P("string", "Command-line arguments passed to the game."),
            "compatibility_layer": P("string", "Proton or Wine version for Windows-only titles on Linux."),
        }, ["game"]),
        T("install_game", "Download and install a game.", {
            "game": P("string", "Title."),
            "drive": P("string", "Library folder or drive to install to."),
        }, ["game"]),
        T("uninstall_game", "Remove a game's files from disk, keeping cloud saves.", {
            "game": P("string", "Title."),
        }, ["game"]),
        T("update_games", "Check for and apply game updates.", {
            "games": P("array", "Titles; all if omitted.", items="string"),
            "only_when_idle": P("boolean", "Wait until the computer is not in use."),
        }),
        T("verify_files", "Check a game's installed files against the store and repair missing or corrupt ones.", {
            "game": P("string", "Title."),
        }, ["game"]),
        T("import_games", "Add games installed by other stores or emulators to the library.", {
            "source": P("string", "Steam, GOG, Epic, itch.io or a ROM folder."),
        }, ["source"]),
        T("tag_games", "Put games into categories such as co-op or finished.", {
            "games": P("array", "Titles.", items="string"),
            "category": P("string", "Category name."),
        }, ["games", "category"]),
        T("search_library", "Find games in your library by name, genre or category.", {
            "query": P("string", "Words to look for."),
            "installed_only": P("boolean", "Only installed games."),
        }, ["query"]),
        T("track_playtime", "Show how long you have played each game, per day or in total.", {
            "game": P("string", "Title; all if omitted."),
            "period": P("string", "week, month, year or all."),
        }),
        T("sync_saves", "Upload or download save games to the cloud.", {
            "game": P("string", "Title."),
            "direction": P("string", "Which way.", ["upload", "download"]),
        }, ["game"]),
        T("export_saves", "Copy a game's save files to a folder or a zip archive.", {
            "game": P("string", "Title."),
            "destination": P("string", "Folder or .zip path."),
        }, ["game", "destination"]),
        T("set_frame_limit", "Cap the frame rate and show a performance overlay while playing.", {
            "max_fps": P("integer", "Frames per second limit; 0 for none."),
            "show_overlay": P("boolean", "Show FPS, CPU and GPU load in a corner."),
            "vsync": P("boolean", "Synchronise with the display refresh."),
        }),
        T("add_friend", "Send a friend request by username or friend code.", {
            "user": P("string", "Username or code."),
        }, ["user"]),
        T("invite_to_game", "Invite friends to join your current game session.", {
            "friends": P("array", "Usernames.", items="string"),
        }, ["friends"]),
        T("hide_game", "Hide a game from the library view without uninstalling it.", {
            "game": P("string", "Title."),
        }, ["game"]),
    ]},
]

OPS = [
    {"name": "TableForge", "tools": [
        T("connect_database", "Open a connection to a database server or file.", {
            "driver": P("string", "PostgreSQL, MySQL, SQLite, SQL Server or MongoDB."),
            "host": P("string", "Server name or address."),
            "port": P("integer", "Server port."),
            "database": P("string", "Database name or file path."),
            "ssh_tunnel": P("string", "Jump host to tunnel through, user@host."),
        }, ["driver"]),
        T("run_query", "Execute SQL against the current connection and show the results.", {
            "sql": P("string", "Statement(s) to execute."),
            "limit": P("integer", "Maximum rows to fetch."),
            "auto_commit": P("boolean", "Commit each statement; false opens a transaction you commit or roll back."),
        }, ["sql"]),
        T("explain_query", "Show the execution plan of a query and where its time goes.", {
            "sql": P("string", "Statement to analyse."),
            "analyze": P("boolean", "Actually run it to get real timings."),
        }, ["sql"]),
        T("browse_table", "Open a table's rows in a grid with sorting and filtering.", {
            "table": P("string", "Table or view."),
            "where": P("string", "Filter condition."),
            "order_by": P("string", "Sort column."),
        }, ["table"]),
        T("edit_row", "Change values in a row and write them back.", {
            "table": P("string", "Table."),
            "key": P("object", "Primary key values of the row."),
            "values": P("object", "Column values to set."),
        }, ["table", "key", "values"]),
        T("export_results", "Export a query result or a table to a file.", {
            "source": P("string", "Table name or SQL."),
            "format": P("string", "CSV, JSON, XLSX, SQL INSERT statements or Parquet."),
            "path": P("string", "Output file."),
            "delimiter": P("string", "Field separator for CSV."),
        }, ["source", "format"]),
        T("import_data", "Load rows from a file into a table.", {
            "path": P("string", "CSV, JSON or XLSX file."),
            "table": P("string", "Target table."),
            "create_table": P("boolean", "Create the table from the file's columns."),
            "header": P("boolean", "First row holds column names."),
        }, ["path", "table"]),
        T("compare_schemas", "Show differences in tables, columns and indexes between two databases and generate a migration script.", {
            "source": P("string", "Connection to compare from."),
            "target": P("string", "Connection to compare to."),
        }, ["source", "target"]),
        T("create_index", "Add an index on one or more columns.", {
            "table": P("string", "Table."),
            "columns": P("array", "Columns.", items="string"),
            "unique": P("boolean", "Reject duplicate values."),
            "method": P("string", "B-tree, hash, GIN or BRIN."),
        }, ["table", "columns"]),
        T("dump_database", "Write a full backup of the database to a file.", {
            "format": P("string", "Plain SQL, custom archive or directory."),
            "compress": P("string", "gzip, zstd or none."),
            "schema_only": P("boolean", "Structure without rows."),
            "path": P("string", "Output file."),
        }),
        T("show_er_diagram", "Draw the tables and their foreign-key relationships as a diagram.", {
            "schema": P("string", "Schema to draw."),
        }),
        T("save_snippet", "Save a query under a name to reuse later.", {
            "name": P("string", "Snippet name."),
            "sql": P("string", "Query text."),
            "folder": P("string", "Folder in the snippet panel."),
        }, ["name", "sql"]),
        T("query_history", "List queries you ran recently, with duration and row count.", {
            "search": P("string", "Only entries containing this text."),
            "days": P("integer", "How far back."),
        }),
        T("rename_table", "Rename a table or one of its columns.", {
            "table": P("string", "Table."),
            "column": P("string", "Column to rename; the table itself if omitted."),
            "new_name": P("string", "New name."),
        }, ["table", "new_name"]),
        T("kill_session", "List or end sessions connected to the database, e.g. one holding a lock.", {
            "pid": P("integer", "Backend process id; lists sessions if omitted."),
            "cancel_only": P("boolean", "Cancel the running statement but keep the connection."),
        }),
    ]},
    {"name": "PostRoute", "tools": [
        T("send_request", "Send an HTTP request and show the response.", {
            "method": P("string", "GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS."),
            "url": P("string", "Address, may use {{variables}}."),
            "headers": P("object", "Header names and values."),
            "body": P("string", "Raw body, JSON, form data or a GraphQL query."),
            "timeout_ms": P("integer", "Give up after this many milliseconds."),
        }, ["method", "url"]),
        T("set_auth", "Set how requests in a collection authenticate.", {
            "collection": P("string", "Collection."),
            "type": P("string", "Basic, Bearer token, API key, OAuth 2.0 or AWS Signature."),
            "token": P("string", "Credential value or variable."),
        }, ["collection", "type"]),
        T("create_collection", "Group requests into a named collection.", {
            "name": P("string", "Collection name."),
            "description": P("string", "Notes shown in the sidebar."),
        }, ["name"]),
        T("set_environment_variable", "Set a variable such as base_url for an environment like staging.", {
            "environment": P("string", "Environment name."),
            "key": P("string", "Variable name."),
            "value": P("string", "Value."),
            "secret": P("boolean", "Mask the value on screen and in exports."),
        }, ["environment", "key", "value"]),
        T("import_requests", "Import requests from an API specification, a command line or another client's export.", {
            "source": P("string", "OpenAPI 3 / Swagger file, cURL command, HAR file or Insomnia export."),
        }, ["source"]),
        T("generate_code", "Turn a request into a code snippet.", {
            "request": P("string", "Request."),
            "language": P("string", "cURL, Python requests, JavaScript fetch, Go net/http or C# HttpClient."),
        }, ["request", "language"]),
        T("write_test", "Add assertions that run after a request, such as status code or response time.", {
            "request": P("string", "Request."),
            "script": P("string", "Test script."),
        }, ["request", "script"]),
        T("run_collection", "Run every request in a collection in order and report which tests passed.", {
            "collection": P("string", "Collection."),
            "iterations": P("integer", "How many times."),
            "data_file": P("string", "CSV or JSON rows, one run per row."),
            "delay_ms": P("integer", "Pause between requests."),
        }, ["collection"]),
        T("mock_server", "Start a mock server that answers with saved example responses.", {
            "collection": P("string", "Collection whose examples to serve."),
            "port": P("integer", "Local port."),
            "delay_ms": P("integer", "Added latency."),
        }, ["collection"]),
        T("schedule_run", "Run a collection automatically at set times and alert on failure.", {
            "collection": P("string", "Collection."),
            "cron": P("string", "Cron expression."),
            "notify_email": P("string", "Who to tell when a test fails."),
        }, ["collection", "cron"]),
        T("share_collection", "Share a collection with a teammate or a workspace.", {
            "collection": P("string", "Collection."),
            "email": P("string", "Teammate."),
            "role": P("string", "viewer or editor."),
        }, ["collection", "email"]),
        T("search_requests", "Search requests by URL, name or body text across collections.", {
            "query": P("string", "Words to look for."),
        }, ["query"]),
        T("open_websocket", "Open a WebSocket or Server-Sent Events connection and exchange messages.", {
            "url": P("string", "ws:// or wss:// address."),
            "message": P("string", "First message to send."),
        }, ["url"]),
        T("compare_responses", "Show the differences between two responses of the same request.", {
            "first": P("string", "Response id."),
            "second": P("string", "Response id."),
        }, ["first", "second"]),
        T("delete_request", "Delete a saved request from a collection.", {
            "request": P("string", "Request."),
        }, ["request"]),
    ]},
    {"name": "LogLens", "tools": [
        T("open_log", "Open a log file, folder or live stream.", {
            "source": P("string", "File path, directory, journald unit or syslog port."),
            "encoding": P("string", "Text encoding."),
        }, ["source"]),
        T("follow_log", "Keep showing new lines as they are written.", {
            "enabled": P("boolean", "False stops following."),
        }),
        T("filter_lines", "Show only lines matching a pattern, level or time range.", {
            "pattern": P("string", "Text or regex."),
            "level": P("string", "Minimum level: DEBUG, INFO, WARN, ERROR or FATAL."),
            "since": P("string", "ISO 8601 timestamp."),
            "until": P("string", "ISO 8601 timestamp."),
        }),
        T("search_logs", "Find text across all open logs and jump between hits.", {
            "query": P("string", "Text to find."),
            "case_sensitive": P("boolean", "Match case."),
        }, ["query"]),
        T("highlight_pattern", "Colour every line that matches a pattern.", {
            "pattern": P("string", "Text or regex."),
            "color": P("string", "Background colour."),
        }, ["pattern"]),
        T("parse_format", "Tell the viewer how to split lines into fields.", {
            "format": P("string", "JSON Lines, logfmt, Apache/nginx combined, or a custom grok pattern."),
        }, ["format"]),
        T("group_similar", "Collapse repeating messages into groups with a count, ignoring numbers and ids.", {
            "min_count": P("integer", "Hide groups smaller than this."),
        }),
        T("show_histogram", "Chart the number of lines over time, split by level.", {
            "bucket": P("string", "Bucket width, e.g. 1m or 1h."),
        }),
        T("bookmark_line", "Mark a line to come back to it later.", {
            "line": P("integer", "Line number."),
            "note": P("string", "Comment."),
        }, ["line"]),
        T("merge_logs", "Interleave several logs into one view ordered by timestamp.", {
            "sources": P("array", "Logs to merge.", items="string"),
            "timezone": P("string", "IANA name, e.g. Europe/Berlin, for logs without an offset."),
        }, ["sources"]),
        T("create_alert", "Notify when a pattern appears more often than a threshold.", {
            "pattern": P("string", "Text or regex."),
            "threshold": P("integer", "Occurrences."),
            "window_minutes": P("integer", "Within this many minutes."),
            "channel": P("string", "email, Slack webhook or desktop notification."),
        }, ["pattern", "threshold"]),
        T("export_lines", "Save the visible or selected lines to a file.", {
            "format": P("string", "Plain text, CSV or JSON."),
            "path": P("string", "Output file."),
        }),
        T("mask_sensitive", "Hide values such as IP addresses, emails or tokens in the display and in exports.", {
            "kinds": P("array", "IPv4/IPv6, email, JWT, payment card numbers (PAN).", items="string"),
        }),
        T("share_view", "Create a link to the current filter and time range for a colleague.", {
            "expires_hours": P("integer", "Link lifetime."),
        }),
        T("trace_request", "Follow one request across services by its correlation or trace id.", {
            "trace_id": P("string", "W3C traceparent or X-Request-ID value."),
        }, ["trace_id"]),
    ]},
    {"name": "HarborDeck", "tools": [
        T("list_containers", "List containers with status, image, ports and uptime.", {
            "all": P("boolean", "Include stopped containers."),
            "host": P("string", "Engine endpoint."),
        }),
        T("run_container", "Create and start a container from an image.", {
            "image": P("string", "Image reference."),
            "name": P("string", "Container name."),
            "ports": P("array", "host:container pairs, e.g. 8080:80.", items="string"),
            "env": P("object", "Environment variables."),
            "volumes": P("array", "Bind mounts or named volumes.", items="string"),
            "restart_policy": P("string", "no, on-failure, always or unless-stopped."),
        }, ["image"]),
        T("stop_container", "Stop a running container.", {
            "container": P("string", "Name or id."),
            "timeout_seconds": P("integer", "Grace period after SIGTERM before SIGKILL."),
        }, ["container"]),
        T("restart_container", "Restart a container.", {
            "container": P("string", "Name or id."),
        }, ["container"]),
        T("view_logs", "Show a container's output.", {
            "container": P("string", "Name or id."),
            "tail": P("integer", "Last N lines."),
            "since": P("string", "Relative time, e.g. 10m."),
            "timestamps": P("boolean", "Prefix each line with its time."),
        }, ["container"]),
        T("exec_shell", "Open an interactive shell inside a running container.", {
            "container": P("string", "Name or id."),
            "shell": P("string", "/bin/sh or /bin/bash."),
            "user": P("string", "Run as this user, e.g. root."),
        }, ["container"]),
        T("pull_image", "Download an image from a registry.", {
            "image": P("string", "name:tag or digest sha256:..."),
            "platform": P("string", "linux/amd64 or linux/arm64."),
        }, ["image"]),
        T("prune_unused", "Delete stopped containers, dangling images, unused networks and volumes to free disk space.", {
            "include_volumes": P("boolean", "Also remove unused volumes."),
            "older_than": P("string", "Only things older than this, e.g. 24h."),
        }),
        T("deploy_stack", "Deploy a group of services from a Compose file.", {
            "compose": P("string", "YAML Compose file contents or path."),
            "stack_name": P("string", "Stack name."),
        }, ["compose"]),
        T("scale_service", "Change how many replicas of a service run.", {
            "service": P("string", "Service."),
            "replicas": P("integer", "Desired count."),
        }, ["service", "replicas"]),
        T("show_stats", "Show live CPU, memory, network and disk usage per container.", {
            "container": P("string", "Name or id; all if omitted."),
        }),
        T("inspect_container", "Show a container's full configuration: environment, mounts, networks and labels.", {
            "container": P("string", "Name or id."),
        }, ["container"]),
        T("rename_container", "Give a container a new name.", {
            "container": P("string", "Name or id."),
            "new_name": P("string", "New name."),
        }, ["container", "new_name"]),
        T("set_resource_limits", "Limit a container's CPU and memory.", {
            "container": P("string", "Name or id."),
            "cpus": P("number", "Number of CPUs, e.g. 1.5."),
            "memory": P("string", "e.g. 512m or 2g; going over it triggers the OOM killer."),
        }, ["container"]),
        T("create_network", "Create a network so containers can reach each other by name.", {
            "name": P("string", "Network name."),
            "driver": P("string", "bridge, overlay or macvlan."),
            "subnet": P("string", "CIDR, e.g. 172.28.0.0/16."),
        }, ["name"]),
    ]},
    {"name": "SnapVault", "tools": [
        T("create_backup_job", "Set up a backup of chosen folders to a destination.", {
            "sources": P("array", "Folders to back up.", items="string"),
            "destination": P("string", "Local disk, NAS share, SFTP server or S3-compatible bucket."),
            "exclude": P("array", "Glob patterns to skip, e.g. *.tmp or node_modules.", items="string"),
        }, ["sources", "destination"]),
        T("run_backup", "Start a backup job now.", {
            "job": P("string", "Job name."),
        }, ["job"]),
        T("schedule_backup", "Set when a backup job runs automatically.", {
            "job": P("string", "Job name."),
            "cron": P("string", "Cron expression."),
            "on_battery": P("boolean", "Also run on a laptop that is not plugged in."),
        }, ["job", "cron"]),
        T("restore_files", "Copy files or folders from a snapshot back to their place or to another folder.", {
            "snapshot": P("string", "Snapshot id or 'latest'."),
            "paths": P("array", "Files or folders.", items="string"),
            "target": P("string", "Where to put them; original place if omitted."),
            "overwrite": P("boolean", "Replace existing files."),
        }, ["snapshot", "paths"]),
        T("list_snapshots", "List the stored snapshots of a job with date and size.", {
            "job": P("string", "Job name."),
        }),
        T("browse_snapshot", "Browse the files of a snapshot as if it were a folder.", {
            "snapshot": P("string", "Snapshot id."),
            "path": P("string", "Folder inside the snapshot."),
        }, ["snapshot"]),
        T("set_retention", "Choose how many old snapshots to keep.", {
            "keep_daily": P("integer", "Daily snapshots to keep."),
            "keep_weekly": P("integer", "Weekly snapshots to keep."),
            "keep_monthly": P("integer", "Monthly snapshots to keep."),
            "keep_yearly": P("integer", "Yearly snapshots to keep."),
        }),
        T("verify_backup", "Check that stored data is intact and can be read back.", {
            "read_data_percent": P("number", "Share of data blocks to read and checksum (SHA-256), 0 to 100."),
        }),
        T("set_encryption", "Protect the backup repository with a passphrase.", {
            "passphrase": P("string", "Passphrase."),
            "cipher": P("string", "AES-256-GCM or ChaCha20-Poly1305."),
        }, ["passphrase"]),
        T("throttle_bandwidth", "Limit upload and download speed during backups.", {
            "upload_kbps": P("integer", "Kilobits per second."),
            "download_kbps": P("integer", "Kilobits per second."),
        }),
        T("compare_snapshots", "Show which files were added, changed or deleted between two snapshots.", {
            "first": P("string", "Snapshot id."),
            "second": P("string", "Snapshot id."),
        }, ["first", "second"]),
        T("delete_snapshot", "Delete a snapshot and free the space only it uses.", {
            "snapshot": P("string", "Snapshot id."),
        }, ["snapshot"]),
        T("search_backups", "Find a file by name across all snapshots.", {
            "name": P("string", "File name or glob."),
        }, ["name"]),
        T("notify_on_failure", "Send an email or push message when a backup fails or has not run for a while.", {
            "channel": P("string", "email or push."),
            "after_days": P("integer", "Warn if no successful run for this many days."),
        }),
        T("prune_repository", "Remove data no snapshot refers to any more and compact the repository.", {
            "dry_run": P("boolean", "Only report what would be removed."),
        }),
    ]},
    {"name": "NetPulse", "tools": [
        T("scan_network", "Discover devices on a subnet, with their names, vendors and open ports.", {
            "range": P("string", "CIDR block, e.g. 192.168.1.0/24."),
            "ports": P("string", "Ports to probe, e.g. 22,80,443 or 1-1024."),
        }, ["range"]),
        T("ping_host", "Check whether a host answers and how long replies take.", {
            "host": P("string", "Name or address."),
            "count": P("integer", "Number of probes."),
            "packet_size": P("integer", "Bytes; with dont_fragment, finds the path MTU."),
            "dont_fragment": P("boolean", "Set the DF bit."),
        }, ["host"]),
        T("trace_route", "Show each hop between this computer and a host, with latency per hop.", {
            "host": P("string", "Name or address."),
            "max_hops": P("integer", "Give up after this many hops."),
        }, ["host"]),
        T("add_monitor", "Watch a host or service and record when it goes down.", {
            "target": P("string", "Host, URL or host:port."),
            "check": P("string", "ICMP, TCP port, HTTP status or DNS record."),
            "interval_seconds": P("integer", "Time between checks."),
        }, ["target", "check"]),
        T("show_uptime", "Show a monitor's availability over a period as a percentage, with outages listed.", {
            "monitor": P("string", "Monitor."),
            "period": P("string", "day, week, month or year."),
        }, ["monitor"]),
        T("capture_packets", "Record network traffic on an interface to a file.", {
            "interface": P("string", "e.g. eth0 or en0."),
            "filter": P("string", "BPF expression, e.g. 'tcp port 443'."),
            "duration_seconds": P("integer", "Stop after."),
            "file": P("string", "pcapng output file."),
        }, ["interface"]),
        T("show_bandwidth", "Show current upload and download rates per device or per interface.", {
            "interface": P("string", "Interface; all if omitted."),
            "top_n": P("integer", "Only the busiest N devices."),
        }),
        T("speed_test", "Measure the internet connection's download and upload speed and latency.", {
            "server": P("string", "Test server; nearest if omitted."),
        }),
        T("lookup_dns", "Resolve a name and show its DNS records.", {
            "name": P("string", "Domain name."),
            "type": P("string", "A, AAAA, MX, TXT, CNAME, NS or SOA."),
            "server": P("string", "Resolver to ask, e.g. 1.1.1.1."),
        }, ["name"]),
        T("check_certificate", "Show a site's TLS certificate chain and the days until it expires.", {
            "host": P("string", "Host name."),
            "port": P("integer", "Default 443."),
        }, ["host"]),
        T("set_alert", "Notify when a monitor goes down or its latency crosses a limit.", {
            "monitor": P("string", "Monitor."),
            "latency_ms": P("integer", "Alert above this round-trip time."),
            "channel": P("string", "email, SMS, Slack, PagerDuty or webhook."),
        }, ["monitor"]),
        T("poll_device", "Read interface counters and status from a switch or router.", {
            "device": P("string", "Address."),
            "community": P("string", "SNMP v2c community string."),
            "oid": P("string", "Object identifier, e.g. 1.3.6.1.2.1.2.2."),
        }, ["device"]),
        T("wake_device", "Send a wake-on-LAN packet to start a computer.", {
            "mac": P("string", "MAC address, e.g. 00:1A:2B:3C:4D:5E."),
            "broadcast": P("string", "Broadcast address of its subnet."),
        }, ["mac"]),
        T("export_report", "Export monitoring data for a period as a report.", {
            "format": P("string", "PDF or CSV."),
            "period": P("string", "e.g. last-month."),
        }, ["format"]),
        T("tag_device", "Label a discovered device, e.g. printer or guest.", {
            "device": P("string", "Address or MAC."),
            "label": P("string", "Label."),
        }, ["device", "label"]),
    ]},
    {"name": "BuildLine", "tools": [
        T("trigger_pipeline", "Start a pipeline run for a branch or commit.", {
            "branch": P("string", "Branch name."),
            "commit": P("string", "SHA of the commit to build."),
            "variables": P("object", "Extra variables for this run."),
        }),
        T("cancel_pipeline", "Stop a running pipeline and its jobs.", {
            "run": P("integer", "Run number."),
        }, ["run"]),
        T("retry_job", "Run a failed job again.", {
            "job": P("string", "Job id."),
        }, ["job"]),
        T("view_job_log", "Show the console output of a job.", {
            "job": P("string", "Job id."),
            "tail": P("integer", "Last N lines."),
        }, ["job"]),
        T("list_pipelines", "List recent pipeline runs with status, branch and duration.", {
            "branch": P("string", "Only this branch."),
            "status": P("string", "running, passed, failed or cancelled."),
        }),
        T("schedule_pipeline", "Run a pipeline on a timetable, such as nightly builds.", {
            "branch": P("string", "Branch."),
            "cron": P("string", "Cron expression."),
            "timezone": P("string", "IANA time zone."),
        }, ["branch", "cron"]),
        T("set_secret", "Store a secret value that jobs can read as an environment variable.", {
            "name": P("string", "Variable name."),
            "value": P("string", "Value."),
            "masked": P("boolean", "Hide it in job logs."),
            "protected_branches": P("boolean", "Only expose it to protected branches."),
        }, ["name", "value"]),
        T("download_artifacts", "Download the files a job produced, such as binaries or test reports.", {
            "job": P("string", "Job id."),
            "path": P("string", "Where to save."),
        }, ["job"]),
        T("approve_deployment", "Approve or reject a deployment that is waiting for manual sign-off.", {
            "environment": P("string", "e.g. production."),
            "decision": P("string", "approve or reject."),
            "comment": P("string", "Reason."),
        }, ["environment", "decision"]),
        T("rollback_deployment", "Redeploy the previous successful version to an environment.", {
            "environment": P("string", "e.g. production."),
        }, ["environment"]),
        T("add_runner", "Register a machine that picks up and runs jobs.", {
            "labels": P("array", "Labels jobs can ask for.", items="string"),
            "executor": P("string", "shell, Docker or Kubernetes."),
            "concurrency": P("integer", "Jobs at once."),
        }),
        T("edit_pipeline_config", "Edit the pipeline definition file and validate it.", {
            "yaml": P("string", "Pipeline definition in YAML."),
            "validate_only": P("boolean", "Lint without saving."),
        }, ["yaml"]),
        T("show_test_report", "Show passed, failed and flaky tests from a run.", {
            "run": P("integer", "Run number."),
            "format": P("string", "JUnit XML or TAP source."),
        }, ["run"]),
        T("cache_settings", "Configure which folders are kept between runs to speed up builds.", {
            "paths": P("array", "Folders to keep.", items="string"),
            "key": P("string", "Cache key, e.g. a hash of package-lock.json."),
            "clear": P("boolean", "Empty the cache now."),
        }),
        T("get_status_badge", "Get the Markdown or HTML for a build status badge to put in a README.", {
            "branch": P("string", "Branch."),
        }),
    ]},
]


def main():
    for fname, apps in (("catalogue_media.json", MEDIA), ("catalogue_ops.json", OPS)):
        with open(os.path.join(HERE, fname), "w", encoding="utf-8") as f:
            json.dump({"apps": apps}, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(fname, len(apps), "apps", sum(len(a["tools"]) for a in apps), "tools")


if __name__ == "__main__":
    main()
