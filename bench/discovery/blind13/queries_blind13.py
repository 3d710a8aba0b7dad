#!/usr/bin/env python3
"""Write queries_blind13.json next to this file: 150 queries of six kinds for the blind13 catalogues
(catalogue_route.json, catalogue_bench.json). Standard library only."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

PLAIN = [
    ("issue a resident parking permit for zone B", ["ParkWarden__issue_permit"]),
    ("record a bait station check at the warehouse", ["BaitLine__inspect_bait_station"]),
    ("collect the cash from vending machine 7", ["VendLoop__collect_cash"]),
    ("record the lift inspection result and its defects", ["LiftLog__record_inspection"]),
    ("calculate the root protection area for tree T14", ["TreeSurvey__calculate_root_protection_area"]),
    ("log a nitrox tank fill to 200 bar", ["DiveDesk__log_tank_fill"]),
    ("preflight the PDF before it goes to print", ["PlateProof__preflight_pdf"]),
    ("scan a paint chip with the spectrophotometer", ["TintMatch__scan_sample"]),
    ("grade a diamond's colour and clarity", ["GemBench__grade_diamond"]),
    ("measure the inharmonicity of this piano", ["PianoTune__measure_inharmonicity"]),
    ("run OCR on the scanned pages", ["ScanBatch__run_ocr"]),
    ("calculate the binding release value for a skier", ["SkiTune__calculate_binding_setting"]),
    ("edit the planogram for machine 14", ["VendLoop__edit_planogram"]),
    ("impose the pages on a press sheet", ["PlateProof__impose_pages"]),
    ("redact personal data in a scanned document", ["ScanBatch__redact_document"]),
    ("set the tariff for the station car park", ["ParkWarden__set_tariff"]),
    ("plan a dive to 30 metres on air", ["DiveDesk__plan_dive"]),
    ("send the customer a soft proof for approval", ["PlateProof__send_proof"]),
    ("print a can label for the tinted paint", ["TintMatch__print_can_label"]),
    ("send these rings to the assay office for hallmarking", ["GemBench__send_for_hallmarking"]),
    ("record a pesticide treatment in the kitchen", ["BaitLine__record_treatment"]),
    ("take the lift out of service", ["LiftLog__take_out_of_service"]),
    ("check whether this tree is protected by a preservation order", ["TreeSurvey__check_protection_status"]),
    ("return the rental gear", ["DiveDesk__return_gear", "SkiTune__return_gear"]),
    ("take a payment for the Open Water course", ["DiveDesk__take_payment"]),
]

TYPO = [
    ("issue a penalty notcie to the white van", ["ParkWarden__issue_penalty_notice"]),
    ("inpsect bait statoin 12", ["BaitLine__inspect_bait_station"]),
    ("recrod a lift calout", ["LiftLog__log_callout"]),
    ("add a tree to the survy with its speceis", ["TreeSurvey__add_tree"]),
    ("anaylse the oxygen in a nitorx cylinder", ["DiveDesk__analyse_gas"]),
    ("apply trappping to the artwork", ["PlateProof__apply_trapping"]),
    ("dispensse tint into the can", ["TintMatch__dispense_tint"]),
    ("identfy a gemstone by its refractve index", ["GemBench__identify_gemstone"]),
    ("regualte the piano actoin", ["PianoTune__regulate_action"]),
    ("splitt the batch by seperator sheets", ["ScanBatch__split_documents"]),
    ("calcluate the comission for the site host", ["VendLoop__pay_commission"]),
    ("do a pitch raize on the old upright", ["PianoTune__tune_pitch_raise"]),
    ("chekc cylinder hydrostatic tesst dates", ["DiveDesk__check_cylinder_test_dates"]),
    ("convrt the RGB images to CMYK", ["PlateProof__convert_colours"]),
    ("reitre the worn out rental equipmnet", ["SkiTune__retire_equipment"]),
    ("estimat the paint quantitiy for a bedroom", ["TintMatch__estimate_quantity"]),
]

REALWORD = [
    ("ticket that car on the double yellows", ["ParkWarden__issue_penalty_notice"]),
    ("the car is stuck between floors with someone inside", ["LiftLog__log_callout"]),
    ("pull the money from the box on machine 7", ["VendLoop__collect_cash"]),
    ("pump this bottle to 232 bar", ["DiveDesk__log_tank_fill"]),
    ("burn the plates for job 4411", ["PlateProof__output_plates"]),
    ("add spreads and chokes to the logo", ["PlateProof__apply_trapping"]),
    ("shoot this swatch of curtain fabric", ["TintMatch__scan_sample"]),
    ("what's this rock worth for the insurers", ["GemBench__write_valuation"]),
    ("is the stamp on this chain genuine, test it", ["GemBench__test_metal"]),
    ("the treble is tinny, needs some needle work on the felts", ["PianoTune__voice_hammers"]),
    ("lay the bearings for a Werckmeister temperament", ["PianoTune__create_tuning"]),
    ("give my planks a hot wax and sharpen the edges", ["SkiTune__log_workshop_job"]),
    ("the kid's boots are too big, change them for a mondo 22", ["SkiTune__swap_equipment"]),
    ("there's a widow-maker hanging over the footpath", ["TreeSurvey__assess_condition", "TreeSurvey__quantify_risk"]),
    ("the rat boxes at the bakery got hammered", ["BaitLine__inspect_bait_station"]),
    ("who's the keeper of this reg", ["ParkWarden__request_keeper_details"]),
]

PARAPHRASE = [
    # BaitLine
    ("a client says mice are chewing through her pantry, come back next Tuesday", ["BaitLine__schedule_visit"]),
    ("which poison have I still got in the truck", ["BaitLine__check_product_stock"]),
    ("tell the kitchen manager to block the hole behind the dishwasher", ["BaitLine__add_recommendation"]),
    ("put today's jobs in a sequence so I spend the least time on the road", ["BaitLine__plan_route"]),
    # VendLoop
    ("the crisps unit in the hospital lobby swallowed money and gave nothing", ["VendLoop__log_fault"]),
    ("what's sitting in our storeroom that will go stale soon", ["VendLoop__check_warehouse_stock"]),
    ("how much do we owe the office block owner as their cut this quarter", ["VendLoop__pay_commission"]),
    ("which snacks and drinks sold best last month at the gym", ["VendLoop__view_sales"]),
    # ParkWarden
    ("a motorist is disputing the fine, decide whether to let it go", ["ParkWarden__review_appeal"]),
    ("how many spaces are free in the multi-storey at the moment", ["ParkWarden__view_occupancy"]),
    ("cone off four spots outside no. 12 so the furniture lorry can stand there Friday", ["ParkWarden__add_suspension"]),
    ("the kiosk where drivers buy a slip at Elm Street is dead", ["ParkWarden__report_equipment_fault"]),
    ("find out who owns the Renault with number AB12 CDE", ["ParkWarden__request_keeper_details"]),
    # LiftLog
    ("a woman is stranded between the third and fourth storey at the hotel", ["LiftLog__log_callout"]),
    ("the elevator's cables look frayed, note how thick they are now", ["LiftLog__check_rope_wear"]),
    ("get a replacement door motor sent over", ["LiftLog__order_part"]),
    ("press the help button in car 2 and make sure the call centre picks up", ["LiftLog__test_alarm"]),
    # TreeSurvey
    ("how far out from the oak trunk must the diggers keep away", ["TreeSurvey__calculate_root_protection_area"]),
    ("is this sycamore legally off-limits for lopping", ["TreeSurvey__check_protection_status"]),
    ("suggest taking the top third off the lime by the school", ["TreeSurvey__recommend_work"]),
    ("how likely is a limb to come down on a pedestrian", ["TreeSurvey__quantify_risk"]),
    # DiveDesk
    ("how long can we stay at 25 m before we'd have to stop on the way up", ["DiveDesk__plan_dive"]),
    ("put Sam on the list for Saturday's wreck outing", ["DiveDesk__add_to_manifest"]),
    ("the learner nailed mask clearing and buoyancy drills today", ["DiveDesk__record_course_progress"]),
    ("which steel 12s have lapsed and need sending away for a pressure exam", ["DiveDesk__check_cylinder_test_dates"]),
    # PlateProof
    ("look over the brochure for faults such as fuzzy pictures or absent typefaces before it goes to press", ["PlateProof__preflight_pdf"]),
    ("how much will 5000 leaflets on gloss cost", ["PlateProof__estimate_job"]),
    ("the client signed off the second round, mark it okay", ["PlateProof__record_approval"]),
    ("book the Heidelberg for Thursday afternoon", ["PlateProof__schedule_press"]),
    ("the dark photo on the back will lay down too wet and take ages to dry", ["PlateProof__check_ink_coverage"]),
    # TintMatch
    ("this green came out darker than the chip, fix the mix", ["TintMatch__adjust_formula"]),
    ("what shades pair nicely with sage", ["TintMatch__suggest_palette"]),
    ("how many tins for a 4 by 5 lounge, done twice over", ["TintMatch__estimate_quantity"]),
    ("the dosing heads squirt the wrong amounts, put them on the scale and correct them", ["TintMatch__calibrate_dispenser"]),
    # GemBench
    ("roughly how heavy is the solitaire still in its setting", ["GemBench__estimate_weight"]),
    ("make sure this necklace wasn't nicked before we pay the seller", ["GemBench__check_stolen_register"]),
    ("a lady wants her grandmother's band made smaller", ["GemBench__take_in_repair"]),
    ("what will a bespoke platinum engagement band cost to make", ["GemBench__quote_custom_piece"]),
    # PianoTune
    ("several notes stay down after you press them", ["PianoTune__log_repair"]),
    ("which owners haven't had their instrument seen for a year, nudge them", ["PianoTune__send_reminder"]),
    ("the old Bechstein is a wreck, give the family a price for bringing it back to life", ["PianoTune__quote_restoration"]),
    # ScanBatch
    ("some images came out crooked, redo those sheets", ["ScanBatch__rescan_pages"]),
    ("push the finished box into the client's records platform", ["ScanBatch__release_batch"]),
    # SkiTune
    ("do we have any 150 snowboards left for the week after Christmas", ["SkiTune__check_fleet_availability"]),
    ("have a junior set waiting for the Smith family when they turn up Sunday", ["SkiTune__reserve_gear"]),
]

PARAM = [
    ("record German cockroach activity in the kitchen", ["BaitLine__log_visit"]),
    ("do the COSHH assessment before fumigating", ["BaitLine__assess_risk"]),
    ("use the DEX data to decide what to load", ["VendLoop__plan_restock"]),
    ("order crisps and cans from Booker", ["VendLoop__order_stock"]),
    ("pass the unpaid case to the bailiffs", ["ParkWarden__send_to_debt_recovery"]),
    ("the motorist says the car had broken down, assess the grounds", ["ParkWarden__review_appeal"]),
    ("when is the next LOLER examination due for lift 4", ["LiftLog__record_inspection"]),
    ("the GSM autodialler failed", ["LiftLog__test_alarm"]),
    ("Ganoderma bracket at the base of the beech", ["TreeSurvey__assess_condition"]),
    ("BS 5837 category for the ash", ["TreeSurvey__set_retention_category"]),
    ("MOD at ppO2 1.4 for this 32 percent fill", ["DiveDesk__analyse_gas"]),
    ("gradient factors 30/70 for tomorrow's wreck", ["DiveDesk__plan_dive"]),
    ("use FOGRA39 for the brochure", ["PlateProof__convert_colours"]),
    ("FM stochastic screening for the art book", ["PlateProof__output_plates"]),
    ("find RAL 7016 anthracite", ["TintMatch__search_colours"]),
    ("is this Burmese ruby heated", ["GemBench__identify_gemstone"]),
    ("send these rings to Birmingham", ["GemBench__send_for_hallmarking"]),
    ("set it to A442 for the orchestra", ["PianoTune__create_tuning"]),
    ("Dampp-Chaser fitted to the Yamaha", ["PianoTune__install_climate_control"]),
    ("divide on Patch T sheets", ["ScanBatch__split_documents"]),
    ("blank out National Insurance numbers", ["ScanBatch__redact_document"]),
    ("ISO 11088 value for a type 3 skier", ["SkiTune__calculate_binding_setting"]),
    ("P-tex the gouge in the base", ["SkiTune__log_workshop_job"]),
]

NONE = [
    "tow away the car blocking my driveway",
    "report a pothole on the high street",
    "renew my driving licence online",
    "adopt a rescue cat to keep the mice down",
    "refund a customer whose coins got swallowed by the machine",
    "negotiate a better price with the crisp manufacturer",
    "install a stairlift in my mother's house",
    "design the lift shaft for a new office block",
    "plant a replacement tree where the old one was felled",
    "identify the bird singing in the oak",
    "book flights to Egypt for the dive club",
    "teach my child to swim before the holiday",
    "design a logo for the bakery's leaflets",
    "translate the brochure into Spanish",
    "mix mortar for a brick wall",
    "strip the old wallpaper in the hallway",
    "buy a ski lift pass for tomorrow",
    "check the avalanche forecast for the weekend",
    "book ski lessons for two beginners",
    "move a grand piano up to the second floor",
    "transcribe this song into sheet music",
    "bid on a diamond at the Antwerp auction",
    "translate the scanned letters into French",
    "what's the weather tomorrow",
    "set an alarm clock for 7 am",
]


def build():
    out = []
    for kind, rows in (("plain", PLAIN), ("typo", TYPO), ("realword", REALWORD),
                       ("paraphrase", PARAPHRASE), ("param", PARAM)):
        out += [{"query": q, "expected": exp, "kind": kind} for q, exp in rows]
    out += [{"query": q, "expected": [], "kind": "none"} for q in NONE]
    return out


if __name__ == "__main__":
    qs = build()
    with open(os.path.join(HERE, "queries_blind13.json"), "w", encoding="utf-8") as f:
        json.dump(qs, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"queries_blind13.json: {len(qs)} queries")
