#!/usr/bin/env python3
"""Write queries_blind8.json (blind8). Standard library only."""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
A = {"SW": "ShapeWorks", "TB": "TraceBoard", "SL": "StitchLoom", "CP": "CutPlan", "BC": "BeamCut", "SM": "ScanMend",
     "CR": "CardRecall", "LP": "LinguaPath", "BS": "BoardSage", "NS": "NoteScribe", "SD": "StarDome", "RT": "RootTree"}


def e(*short):
    out = []
    for s in short:
        app, tool = s.split(".", 1)
        out.append(f"{A[app]}__{tool}")
    return out


Q = []


def add(kind, query, *expected):
    Q.append({"query": query, "expected": e(*expected), "kind": kind})


# plain
for q, *x in [
    ("extrude the sketch 10 mm", "SW.extrude_sketch"),
    ("run the design rule check on my board", "TB.run_drc"),
    ("export the bill of materials for this design", "TB.export_bom"),
    ("add lettering to the embroidery design", "SL.add_lettering"),
    ("optimize the layout of parts on my plywood sheets", "CP.optimize_layout"),
    ("frame the laser job before I start", "BC.frame_job"),
    ("fill the holes in the scanned mesh", "SM.fill_holes"),
    ("create a new flashcard deck called Biology", "CR.create_deck"),
    ("conjugate the verb avoir", "LP.conjugate_verb"),
    ("analyze this chess position with the engine", "BS.analyze_position"),
    ("transpose the whole score to another key", "NS.transpose"),
    ("what are the rise and set times of Mars today", "SD.get_rise_set_times"),
    ("import a GEDCOM file into a new tree", "RT.import_gedcom"),
    ("merge these two people, they are the same person", "RT.merge_people"),
    ("decimate the mesh down to 100k faces", "SM.decimate_mesh"),
    ("track the ISS satellite and list its next passes", "SD.track_satellite"),
    ("import games from a PGN file", "BS.import_pgn"),
    ("add hinges and drawer slides to the project", "CP.add_hardware"),
    ("estimate how much yarn each colour needs", "SL.estimate_yarn"),
    ("set power and speed for the cut layer", "BC.set_layer_settings"),
    ("search my cards for the word photosynthesis", "CR.search_cards"),
    ("extract the parts for each instrument from the score", "NS.extract_parts"),
    ("generate gerbers so I can send the board to the fab", "TB.generate_gerbers"),
    ("show a pedigree chart of my grandmother's ancestors", "RT.show_pedigree_chart"),
    ("start a review session with the cards due today", "CR.start_review"),
]:
    add("plain", q, *x)

# typo: misspellings that are not words
for q, *x in [
    ("extrdue the sketch by 5mm", "SW.extrude_sketch"),
    ("genrate gerbers for the board", "TB.generate_gerbers"),
    ("auto digitze this logo into stitches", "SL.auto_digitize"),
    ("optimze the cut layuot", "CP.optimize_layout"),
    ("burn a tesst grid of power and speed", "BC.run_test_grid"),
    ("remvoe outliers from the point cloud", "SM.remove_outliers"),
    ("conjugaet tener in every tense", "LP.conjugate_verb"),
    ("anaylze the current positon", "BS.analyze_position"),
    ("trasnpose the melody down a fourth", "NS.transpose"),
    ("show the constelation lines", "SD.show_constellations"),
    ("find duplciates in my family tree", "RT.find_duplicates"),
    ("export my flashcrad deck", "CR.export_deck"),
    ("add a 2mm filllet to these edges", "SW.fillet_edges"),
    ("calcluate board feet for the walnut", "CP.calculate_board_feet"),
    ("check my pronounciation of grenouille", "LP.check_pronunciation"),
    ("simulaet the stitchout before sewing", "SL.simulate_stitchout"),
]:
    add("typo", q, *x)

# realword: real words with a second sense / jargon
for q, *x in [
    ("add a mate between the bolt and the bracket", "SW.add_mate"),
    ("pour ground on the bottom layer", "TB.add_copper_pour"),
    ("put a satin border around the badge", "SL.set_stitch_type"),
    ("cut a dado where the shelf meets the side", "CP.add_joint"),
    ("add banding to the front edge of the shelf", "CP.add_edge_banding"),
    ("kill the job right now", "BC.stop_job"),
    ("bury this card for a while", "CR.suspend_card"),
    ("give me some mate in two puzzles", "BS.train_tactics"),
    ("show a fan chart for my father", "RT.show_pedigree_chart"),
    ("slew to Andromeda", "SD.slew_telescope"),
    ("put a hairpin under bar 12", "NS.add_dynamics"),
    ("drill my Sicilian lines as black", "BS.build_repertoire"),
    ("when is Jupiter's transit tonight", "SD.get_rise_set_times"),
    ("set the kerf and nest the pieces on the sheets", "CP.optimize_layout"),
    ("put a slur over these four notes", "NS.add_articulation"),
    ("add the 1881 census to grandpa's record", "RT.add_event", "RT.add_source"),
]:
    add("realword", q, *x)

# paraphrase: no content word shared with the tool's name, description, params or app
for q, *x in [
    ("soften those sharp corners a bit", "SW.fillet_edges"),
    ("I want a vase: spin the outline about its centreline", "SW.revolve_sketch"),
    ("how heavy will this bracket be?", "SW.measure"),
    ("I need a printout blueprint for the machinist", "SW.create_drawing"),
    ("are there any floating inputs or conflicting outputs in my circuit diagram?", "TB.run_erc"),
    ("give me a shopping spreadsheet of everything I have to order for this circuit", "TB.export_bom"),
    ("flood the underside with a ground plane", "TB.add_copper_pour"),
    ("find me an op-amp I can actually buy today", "TB.search_parts"),
    ("fewer spool swaps on my design please", "SL.reorder_colours"),
    ("copy the finished logo to a thumb drive for the sewing unit", "SL.export_machine_file"),
    ("I'd like the knitting directions spelled out line by line, not as a grid", "SL.generate_written_pattern"),
    ("I'm making a sweater, how many skeins should I buy", "SL.estimate_yarn"),
    ("how much will the lumber for this bookcase set me back", "CP.estimate_cost"),
    ("I picked up three 4x8 panels of MDF at the yard", "CP.add_stock"),
    ("I'd like little tags on every piece so I know which is which", "CP.print_labels"),
    ("drop the left shelf, I won't need it anymore", "CP.delete_part"),
    ("do a dry run around the edges so I can see where it lands", "BC.frame_job"),
    ("nudge the nozzle five millimetres left", "BC.jog_head"),
    ("I want to etch a name on a round water bottle", "BC.enable_rotary"),
    ("hold on a sec, I need to check the ventilation fan", "BC.pause_job"),
    ("combine my front and back captures of the statue", "SM.align_scans"),
    ("the file is way too heavy, cut down the polygons", "SM.decimate_mesh"),
    ("the statue looks grainy, make it look polished", "SM.smooth_mesh"),
    ("how far off is the printed bracket from what the engineer intended", "SM.compare_to_cad"),
    ("I remembered that one without any trouble", "CR.grade_card"),
    ("new Q&A for my Spanish pile: perro means dog", "CR.add_card"),
    ("push my progress up to my phone", "CR.sync_collection"),
    ("let my classmates grab my biology set", "CR.share_deck"),
    ("fix the mistakes in my French essay", "LP.correct_text"),
    ("pretend to be a waiter and talk with me in Italian", "LP.practice_conversation"),
    ("can I get an actual person to coach me over a webcam Thursday evening", "LP.schedule_tutor_session"),
    ("was my rolled r any good?", "LP.check_pronunciation"),
    ("what did I do wrong in yesterday's match?", "BS.review_game"),
    ("is king and rook versus king and knight a forced win?", "BS.probe_tablebase"),
    ("I want black at the bottom", "BS.flip_board"),
    ("what do grandmasters usually choose here?", "BS.open_opening_explorer"),
    ("I want the brass to get stronger at bar 20", "NS.add_dynamics"),
    ("let me listen to what I wrote", "NS.play_score"),
    ("mark the guitar harmonies over the tune, Am then G7", "NS.add_chord_symbols"),
    ("what's worth pointing my scope at after dark this Friday", "SD.plan_observing_session"),
    ("pretend I'm out in a remote desert far from any city glow", "SD.set_light_pollution"),
    ("how far away is Betelgeuse", "SD.show_object_info"),
    ("I'm watching the heavens from Madrid tonight", "SD.set_location"),
    ("how is Aunt Rosa kin to me?", "RT.calculate_relationship"),
    ("grandpa was christened in 1902 in Cork", "RT.add_event"),
]:
    add("paraphrase", q, *x)

# param: the key word is only in a parameter description
for q, *x in [
    ("export the bracket as STEP for the supplier", "SW.export_model"),
    ("use third-angle projection for the sheet", "SW.create_drawing"),
    ("add a 2 degree draft so it releases from the mould", "SW.extrude_sketch"),
    ("use the SOIC-8 package for the op amp", "TB.place_component"),
    ("include the Excellon files for the holes", "TB.generate_gerbers"),
    ("only show things in stock at Digi-Key", "TB.search_parts"),
    ("save it as PES for my Brother", "SL.export_machine_file"),
    ("use Isacord 1902 for the petals", "SL.set_thread_colour"),
    ("I'm knitting this on circular needles", "SL.generate_written_pattern"),
    ("I only have a panel saw, so straight through-cuts only", "CP.optimize_layout"),
    ("connect to my Ruida controller", "BC.connect_laser"),
    ("use Floyd-Steinberg for this portrait", "BC.set_dithering"),
    ("turn on air assist so the plywood doesn't char", "BC.set_layer_settings"),
    ("run a Poisson reconstruction at octree depth 10", "SM.reconstruct_surface"),
    ("open the E57 from the site survey", "SM.import_scan"),
    ("aim for 90% retention with FSRS", "CR.set_scheduler_options"),
    ("bring in my Quizlet set", "CR.import_deck"),
    ("which cards are leeches?", "CR.search_cards"),
    ("I need DELE exam prep with a native speaker", "LP.schedule_tutor_session"),
    ("show three lines with MultiPV", "BS.analyze_position"),
    ("find Najdorf games, ECO B90", "BS.search_games"),
    ("I have a 23andMe kit, where do my matches go", "RT.match_dna"),
    ("generate an ahnentafel for my mother", "RT.print_report"),
]:
    add("param", q, *x)

# none: no tool answers (near misses, plus a few out-of-domain requests)
for q in [
    "run a finite element stress simulation on the bracket",
    "order five copies of this PCB from a board house",
    "simulate the circuit in SPICE and plot the voltages",
    "buy more embroidery thread online",
    "how much will this shelf sag under 40 kg of books",
    "check the temperature of the laser's water chiller",
    "send the cleaned statue to my 3D printer",
    "rig the scanned figure with a skeleton for animation",
    "how many cards did my friend study this week",
    "play a blitz game online against a human opponent",
    "sign me up for a chess tournament this weekend",
    "tune my violin with the microphone",
    "record me singing along with the score",
    "write my French homework essay for me",
    "will it be cloudy tonight where I live",
    "order a DNA test kit",
    "find the current home addresses of my living cousins",
    "read the handwriting on this parish register scan",
    "how long will this laser job take to finish",
    "generate G-code for my CNC router",
    "start a chess clock with five minutes each",
    "book a flight to Lisbon for next Tuesday",
    "what's the capital of Australia",
    "set an alarm for 7 am",
    "summarize today's news headlines",
]:
    add("none", q)

if __name__ == "__main__":
    with open(os.path.join(HERE, "queries_blind8.json"), "w", encoding="utf-8") as f:
        json.dump(Q, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(len(Q), "queries")
