"""Write queries_blind7.json (standard library only, imports nothing from broker).

    python3 bench/discovery/blind7/queries_blind7.py

Each entry: (query, expected names, kind). Written from memory of the catalogues right after
make_blind7.py, before any search was run (none was).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

Q = [
    # ---- plain: says what the tool does with some of its words
    ("start recording my screen with the webcam", ["ReelCast__start_recording"], "plain"),
    ("take a screenshot of this window", ["ReelCast__take_screenshot"], "plain"),
    ("trim the end of the recording", ["ReelCast__trim_recording"], "plain"),
    ("decimate the mesh to a quarter of its faces", ["ClayForm__decimate_mesh"], "plain"),
    ("bake normal maps for the low-poly model", ["ClayForm__bake_maps"], "plain"),
    ("add a reference image for the front view", ["ClayForm__import_reference"], "plain"),
    ("shift all subtitle timings two seconds later", ["SubStudio__shift_timing"], "plain"),
    ("merge these two subtitle lines", ["SubStudio__merge_cues"], "plain"),
    ("translate the subtitles into Japanese", ["SubStudio__translate_subtitles"], "plain"),
    ("scan the movie library for new files", ["StreamShelf__scan_library"], "plain"),
    ("who is watching right now on the server", ["StreamShelf__list_active_streams"], "plain"),
    ("mark season 2 as watched", ["StreamShelf__mark_watched"], "plain"),
    ("show the previous frames with onion skin", ["FrameFlip__toggle_onion_skin"], "plain"),
    ("export the frames as a sprite sheet", ["FrameFlip__export_sprite_sheet"], "plain"),
    ("verify the game files and repair corrupt ones", ["GameDock__verify_files"], "plain"),
    ("how long have I played each game this month", ["GameDock__track_playtime"], "plain"),
    ("show the execution plan for this query", ["TableForge__explain_query"], "plain"),
    ("compare schemas between the staging and production databases", ["TableForge__compare_schemas"], "plain"),
    ("generate a code snippet for this request", ["PostRoute__generate_code"], "plain"),
    ("start a mock server with the example responses", ["PostRoute__mock_server"], "plain"),
    ("highlight lines matching timeout in red", ["LogLens__highlight_pattern"], "plain"),
    ("merge the two logs by timestamp", ["LogLens__merge_logs"], "plain"),
    ("open a shell inside the web container", ["HarborDeck__exec_shell"], "plain"),
    ("restore files from last night's snapshot", ["SnapVault__restore_files"], "plain"),
    ("trace the route to example.com", ["NetPulse__trace_route"], "plain"),
    ("retry the failed job", ["BuildLine__retry_job"], "plain"),

    # ---- typo: misspellings that are not English words
    ("exprot the recroding as mp4", ["ReelCast__export_recording"], "typo"),
    ("genrate captoins for my screen video", ["ReelCast__add_captions"], "typo"),
    ("subdivdie the sculpt for more detial", ["ClayForm__subdivide"], "typo"),
    ("spel chekc the subtitels", ["SubStudio__spell_check"], "typo"),
    ("downlaod subtitels for this moive", ["StreamShelf__download_subtitles"], "typo"),
    ("refrsh the metdata and postres", ["StreamShelf__refresh_metadata"], "typo"),
    ("flod fill this araa with blue", ["FrameFlip__fill_area"], "typo"),
    ("uninstal the gmae but keep my saves", ["GameDock__uninstall_game"], "typo"),
    ("conect to the postgres databse", ["TableForge__connect_database"], "typo"),
    ("creat an idnex on the email colum", ["TableForge__create_index"], "typo"),
    ("sned a POST reqeust to the login endpoint", ["PostRoute__send_request"], "typo"),
    ("filtr the log to erorr level only", ["LogLens__filter_lines"], "typo"),
    ("prnue unsued images and volumes", ["HarborDeck__prune_unused"], "typo"),
    ("verfiy the backpu is intact", ["SnapVault__verify_backup"], "typo"),
    ("chek when the certficate expirse", ["NetPulse__check_certificate"], "typo"),
    ("trigegr a pipline on the main branch", ["BuildLine__trigger_pipeline"], "typo"),

    # ---- realword: real words in a second sense / jargon, or that look like typos
    ("crop the first ten seconds off my screencast", ["ReelCast__trim_recording"], "realword"),
    ("black out my inbox in the clip", ["ReelCast__redact_region"], "realword"),
    ("inflate the cheeks on my bust", ["ClayForm__select_brush"], "realword"),
    ("freeze the face so my strokes skip it", ["ClayForm__mask_area"], "realword"),
    ("nudge every cue back half a second", ["SubStudio__shift_timing"], "realword"),
    ("burn the words into my screencast", ["ReelCast__add_captions"], "realword"),
    ("kick my nephew off the stream", ["StreamShelf__stop_stream"], "realword"),
    ("duplicate this cel onto a new frame", ["FrameFlip__add_frame"], "realword"),
    ("shelve Skyrim so it stops cluttering my list", ["GameDock__hide_game"], "realword"),
    ("kill the query that is hogging a lock", ["TableForge__kill_session"], "realword"),
    ("stub the payments API locally", ["PostRoute__mock_server"], "realword"),
    ("tail the access log as it grows", ["LogLens__follow_log"], "realword"),
    ("fold duplicate messages together", ["LogLens__group_similar"], "realword"),
    ("bounce the redis container", ["HarborDeck__restart_container"], "realword"),
    ("sniff traffic on eth0", ["NetPulse__capture_packets"], "realword"),
    ("greenlight the production release", ["BuildLine__approve_deployment"], "realword"),

    # ---- paraphrase: everyday words, no content word shared with the tool's name or description
    ("film what I'm doing on my monitor", ["ReelCast__start_recording"], "paraphrase"),
    ("take a short break mid-screencast without finishing it", ["ReelCast__pause_recording"], "paraphrase"),
    ("give my boss a URL so she can see it", ["ReelCast__share_link"], "paraphrase"),
    ("use my headset for the voiceover instead of the laptop's built-in one", ["ReelCast__choose_audio_input"], "paraphrase"),
    ("make whatever I do on the left side happen on the right too", ["ClayForm__set_symmetry"], "paraphrase"),
    ("the wireframe got stretched and messy, give it clean uniform edge flow", ["ClayForm__remesh"], "paraphrase"),
    ("use less material by making the figure empty inside", ["ClayForm__make_hollow"], "paraphrase"),
    ("oops, revert what I just did to the ear", ["ClayForm__undo_stroke"], "paraphrase"),
    ("the dialogue text is out of step with what people say, line it up for me", ["SubStudio__sync_to_audio"], "paraphrase"),
    ("cut this caption into a pair of shorter ones", ["SubStudio__split_cue"], "paraphrase"),
    ("which captions flash by before anyone can take them in?", ["SubStudio__check_reading_speed"], "paraphrase"),
    ("make the captions bigger and yellow with a dark rim around the letters", ["SubStudio__style_subtitles"], "paraphrase"),
    ("make my anime collection available on my home media box", ["StreamShelf__add_library"], "paraphrase"),
    ("my old TV can't handle 4K, make the box downgrade them live", ["StreamShelf__set_transcoding"], "paraphrase"),
    ("watch my films from the hotel while travelling", ["StreamShelf__enable_remote_access"], "paraphrase"),
    ("let my sister see my TV episodes from her place", ["StreamShelf__share_library"], "paraphrase"),
    ("begin a blank 32x32 retro artwork", ["FrameFlip__new_canvas"], "paraphrase"),
    ("slow the run cycle down so each pose lingers", ["FrameFlip__set_frame_duration"], "paraphrase"),
    ("turn all the red bits blue", ["FrameFlip__replace_color"], "paraphrase"),
    ("I want to play Celeste now", ["GameDock__launch_game"], "paraphrase"),
    ("get Hades onto my PC", ["GameDock__install_game"], "paraphrase"),
    ("continue my progress on the laptop where I left off on the desktop", ["GameDock__sync_saves"], "paraphrase"),
    ("stop my graphics card running flat out, hold it at 60", ["GameDock__set_frame_limit"], "paraphrase"),
    ("count yesterday's orders straight from the db", ["TableForge__run_query"], "paraphrase"),
    ("make a copy of the whole db I can keep safe", ["TableForge__dump_database"], "paraphrase"),
    ("visualise which records point at which, across the whole db", ["TableForge__show_er_diagram"], "paraphrase"),
    ("attach my login details to every call in this folder", ["PostRoute__set_auth"], "paraphrase"),
    ("fail if the login call takes over 300ms or isn't a 200", ["PostRoute__write_test"], "paraphrase"),
    ("keep a live two-way channel to the chat backend", ["PostRoute__open_websocket"], "paraphrase"),
    ("when did the errors spike today?", ["LogLens__show_histogram"], "paraphrase"),
    ("tell me if 'disk full' shows up dozens of times in an hour", ["LogLens__create_alert"], "paraphrase"),
    ("keep customers' personal data out of sight on screen", ["LogLens__mask_sensitive"], "paraphrase"),
    ("what's running on the docker host?", ["HarborDeck__list_containers"], "paraphrase"),
    ("I need five instances of the worker instead of one", ["HarborDeck__scale_service"], "paraphrase"),
    ("which of my docker apps is eating all the RAM?", ["HarborDeck__show_stats"], "paraphrase"),
    ("put the api and db on a shared private LAN", ["HarborDeck__create_network"], "paraphrase"),
    ("what restore points do I have?", ["SnapVault__list_snapshots"], "paraphrase"),
    ("don't hog the internet while copying to the cloud", ["SnapVault__throttle_bandwidth"], "paraphrase"),
    ("lock my archive so only I can open it", ["SnapVault__set_encryption"], "paraphrase"),
    ("what gadgets are on my wifi?", ["NetPulse__scan_network"], "paraphrase"),
    ("am I getting the 500 Mbps I pay for?", ["NetPulse__speed_test"], "paraphrase"),
    ("what IP does github.com point to?", ["NetPulse__lookup_dns"], "paraphrase"),
    ("abort the CI that's in progress right now", ["BuildLine__cancel_pipeline"], "paraphrase"),
    ("grab the compiled apk from CI", ["BuildLine__download_artifacts"], "paraphrase"),
    ("give the deploy step our Stripe key without putting it in the repo", ["BuildLine__set_secret"], "paraphrase"),
    ("prod is broken, put back last week's release", ["BuildLine__rollback_deployment"], "paraphrase"),

    # ---- param: the key word is only in a parameter's description
    ("export my screen capture as ProRes", ["ReelCast__export_recording"], "param"),
    ("save the sculpt as an STL", ["ClayForm__export_model"], "param"),
    ("bake ambient occlusion for the game model", ["ClayForm__bake_maps"], "param"),
    ("convert the subs for PAL", ["SubStudio__change_framerate"], "param"),
    ("deliver CEA-608 captions to the broadcaster", ["SubStudio__export_subtitles"], "param"),
    ("turn on NVENC for the media server", ["StreamShelf__set_transcoding"], "param"),
    ("only allow PG-13 for the kids", ["StreamShelf__create_user"], "param"),
    ("get SDH subtitles for Dune", ["StreamShelf__download_subtitles"], "param"),
    ("switch to the DB32 colours", ["FrameFlip__load_palette"], "param"),
    ("keep it crisp with nearest neighbour when enlarging", ["FrameFlip__resize_sprite"], "param"),
    ("run this Windows game through Proton", ["GameDock__launch_game"], "param"),
    ("pull in my itch.io games", ["GameDock__import_games"], "param"),
    ("connect through an SSH tunnel to prod", ["TableForge__connect_database"], "param"),
    ("save the result as Parquet", ["TableForge__export_results"], "param"),
    ("load this HAR capture from the browser", ["PostRoute__import_requests"], "param"),
    ("use OAuth 2.0 for the whole collection", ["PostRoute__set_auth"], "param"),
    ("read these lines as logfmt", ["LogLens__parse_format"], "param"),
    ("hide JWTs in the log view", ["LogLens__mask_sensitive"], "param"),
    ("the container keeps getting OOM killed, give it 2g", ["HarborDeck__set_resource_limits"], "param"),
    ("back up my photos to an S3 bucket", ["SnapVault__create_backup_job"], "param"),
    ("encrypt with ChaCha20", ["SnapVault__set_encryption"], "param"),
    ("read SNMP counters off the core switch", ["NetPulse__poll_device"], "param"),
    ("page the on-call via PagerDuty when the site is down", ["NetPulse__set_alert"], "param"),

    # ---- none: near misses that no tool in either catalogue answers
    ("rename my wifi network", [], "none"),
    ("book a flight to Lisbon", [], "none"),
    ("live stream my screen to Twitch", [], "none"),
    ("3D print the sculpt now", [], "none"),
    ("rig the sculpt with bones", [], "none"),
    ("animate the sculpt with keyframes", [], "none"),
    ("buy a new game in the store", [], "none"),
    ("gift a game to a friend", [], "none"),
    ("refund the game I bought yesterday", [], "none"),
    ("reset the admin password of the media server", [], "none"),
    ("block a device from my wifi", [], "none"),
    ("upgrade postgres to version 16", [], "none"),
    ("publish the API documentation website", [], "none"),
    ("rotate the log files every night", [], "none"),
    ("renew the TLS certificate for my site", [], "none"),
    ("add a firewall rule blocking telnet", [], "none"),
    ("merge the feature branch into main", [], "none"),
    ("review the pull request", [], "none"),
    ("change my gamer profile picture", [], "none"),
    ("share my screen in a video call", [], "none"),
    ("tag the docker image as v2", [], "none"),
    ("colour grade the screen recording", [], "none"),
    ("subscribe to a podcast", [], "none"),
    ("schedule a meeting with the ops team", [], "none"),
    ("pay the cloud backup invoice", [], "none"),
]


def main():
    out = [{"query": q, "expected": e, "kind": k} for q, e, k in Q]
    with open(os.path.join(HERE, "queries_blind7.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(len(out), "queries")


if __name__ == "__main__":
    main()
