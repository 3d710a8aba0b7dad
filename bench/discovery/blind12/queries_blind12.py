#!/usr/bin/env python3
"""Write queries_blind12.json: 150 queries {"query", "expected", "kind"} for the blind12 catalogues.

Standalone (standard library only). `expected` lists agent-facing names <App>__<tool_name>, any one
of which is right; it is empty for kind "none"."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

PLAIN = [
    ("receive an inbound shipment against a purchase order", ["PalletPath__receive_shipment"]),
    ("start a cycle count in zone B", ["PalletPath__start_cycle_count"]),
    ("record the hammer price for lot 112", ["BidHammer__record_hammer"]),
    ("register a new bidder and give them a paddle number", ["BidHammer__register_bidder"]),
    ("weigh out the truck and close the ticket", ["WeighGate__weigh_out"]),
    ("void ticket 5531, it was entered wrong", ["WeighGate__void_ticket"]),
    ("export the tonnage report by haulier for March", ["WeighGate__export_tonnage_report"]),
    ("text the customer that their dry cleaning is ready to collect", ["PressTicket__send_ready_text"]),
    ("note a wine stain on the silk blouse before cleaning", ["PressTicket__note_stain"]),
    ("list vacant climate-controlled units", ["UnitStore__check_availability"]),
    ("send the lien notice for unit 214", ["UnitStore__send_lien_notice"]),
    ("calculate heating and cooling loads room by room", ["DuctLoad__calculate_loads"]),
    ("size the ducts for the airflow each room needs", ["DuctLoad__size_ducts"]),
    ("start a glaze firing on kiln 2", ["KilnFire__start_firing"]),
    ("add a glaze recipe with ingredient percentages", ["KilnFire__add_glaze_recipe"]),
    ("throw turnout 7", ["RailDeck__throw_turnout"]),
    ("add a locomotive to the roster with its decoder address", ["RailDeck__add_locomotive"]),
    ("seed the heats for the 100 freestyle by entry time", ["SplitLane__seed_heats"]),
    ("disqualify the swimmer in lane 4 for a turn infringement", ["SplitLane__disqualify_swimmer"]),
    ("calculate the cost of this fragrance formula per bottle", ["ScentSmith__calculate_cost"]),
    ("compare two versions of my formula side by side", ["ScentSmith__compare_formulas"]),
    ("send a hint to the players in room 3", ["CluePanel__send_hint"]),
    ("reset the room for the next group", ["CluePanel__reset_room"]),
    ("issue key GM-4 to the new caretaker", ["PinChart__issue_key"]),
    ("report a lost key for the east wing", ["PinChart__report_lost_key"]),
]

TYPO = [
    ("recieve the containr shipment at dock 3", ["PalletPath__receive_shipment"]),
    ("ship the ordr with fedx", ["PalletPath__ship_order"]),
    ("publsh the sale catalouge online", ["BidHammer__publish_catalogue"]),
    ("setle the consignors acount after the sale", ["BidHammer__settle_consignor"]),
    ("store the tare wieght for this lorry", ["WeighGate__store_tare"]),
    ("calibrate the weighbrige with test wieghts", ["WeighGate__calibrate_scale"]),
    ("schedual a van colection for tuesday", ["PressTicket__schedule_pickup_delivery"]),
    ("chnage the gate code for tenant Okafor", ["UnitStore__set_gate_code"]),
    ("add a widnow to the kitchen facing south", ["DuctLoad__add_window"]),
    ("check the static presure on the blowr", ["DuctLoad__check_static_pressure"]),
    ("log the firng result with the witnes cones", ["KilnFire__log_firing_result"]),
    ("progam CV 3 on the locomtive", ["RailDeck__program_cv"]),
    ("emergancy stop all trians", ["RailDeck__emergency_stop"]),
    ("imprt the club entreis for the gala", ["SplitLane__import_entries"]),
    ("list the allergns in the finsihed perfume", ["ScentSmith__list_allergens"]),
    ("genrate bittings for the mastr key system", ["PinChart__generate_bitting"]),
]

REALWORD = [
    ("kill the juice to the whole layout now", ["RailDeck__emergency_stop"]),
    ("open up the regulator on the Flying Scotsman", ["RailDeck__set_throttle"]),
    ("knock it down to paddle 212 at four hundred", ["BidHammer__record_hammer"]),
    ("a punter can't make it on the day, put his book bid in on lot 40", ["BidHammer__record_absentee_bid"]),
    ("is this tipper over its plated weight?", ["WeighGate__check_overload"]),
    ("lift the arm on the way out", ["WeighGate__open_barrier"]),
    ("overlock 88, they're three months behind", ["UnitStore__lock_out_tenant"]),
    ("what tonnage AC does this house need", ["DuctLoad__size_equipment"]),
    ("the farmhouse is drafty, put that into the heat loss sums", ["DuctLoad__set_infiltration"]),
    ("candle the pots overnight before the bisque", ["KilnFire__create_firing_schedule", "KilnFire__start_firing"]),
    ("my glaze crawled on the rim, write that down for that load", ["KilnFire__log_firing_result"]),
    ("pull Amy out of the 200 fly", ["SplitLane__scratch_swimmer"]),
    ("she jumped on the relay changeover, she's out", ["SplitLane__disqualify_swimmer"]),
    ("jot down the dry-down after four hours on the strip", ["ScentSmith__record_smell_test"]),
    ("give them a nudge, they're stuck on the bookshelf", ["CluePanel__send_hint"]),
    ("are there any ghost keys in this suite?", ["PinChart__check_cross_keying"]),
]

PARAPHRASE = [
    ("log what came off the lorry from our supplier this morning", ["PalletPath__receive_shipment"]),
    ("which shelf should the newly landed crates go on", ["PalletPath__putaway_stock"]),
    ("the worker in aisle 6 came up two units light on that line", ["PalletPath__confirm_pick"]),
    ("top up the front slots from the overflow racks up high", ["PalletPath__replenish_pick_faces"]),
    ("send the money owed to folks whose stuff went under the gavel last week, less our cut",
     ["BidHammer__settle_consignor"]),
    ("what did Victorian silver teapots fetch in previous years", ["BidHammer__search_lots"]),
    ("the chap who won the grandfather clock wants it couriered to Ohio, what would that run to",
     ["BidHammer__arrange_shipping"]),
    ("shuffle the running sequence so all the paintings come before the rugs", ["BidHammer__reorder_lots"]),
    ("how many kilos are sitting on the platform right now", ["WeighGate__capture_weight"]),
    ("remember this tipper's unladen figure so next time it only crosses once", ["WeighGate__store_tare"]),
    ("is this artic carrying more than it's allowed to on the road", ["WeighGate__check_overload"]),
    ("a builder brought in rubble from a demolition job, fill in the paperwork", ["WeighGate__record_waste_transfer"]),
    ("shorten a pair of trousers for Mrs Patel", ["PressTicket__record_alteration"]),
    ("nobody has fetched these coats in six months, give them to charity", ["PressTicket__mark_unclaimed"]),
    ("a client says we ruined her cashmere jumper", ["PressTicket__log_claim"]),
    ("let Mr Gomez know his suits are done", ["PressTicket__send_ready_text"]),
    ("a family wants to stash their furniture with us from Monday", ["UnitStore__rent_unit"]),
    ("bump what current occupants pay by five percent", ["UnitStore__change_rent_rate"]),
    ("the roller shutter on C12 won't go up", ["UnitStore__report_unit_issue"]),
    ("the guy in 41 is leaving Friday, do the walkthrough", ["UnitStore__move_out"]),
    ("how much oomph should the new kit have to keep this bungalow comfy", ["DuctLoad__size_equipment"]),
    ("where do vents go in the master bedroom", ["DuctLoad__place_registers"]),
    ("over a decade, which setup would be thriftier", ["DuctLoad__compare_options"]),
    ("how many BTUs does each space lose in winter and gain in summer", ["DuctLoad__calculate_loads"]),
    ("how hot is the pottery oven right now", ["KilnFire__get_kiln_status"]),
    ("cut the heat in the pottery shed, something smells scorched", ["KilnFire__stop_firing"]),
    ("jump ahead past this climb and go straight to the soak", ["KilnFire__skip_segment"]),
    ("make enough of the celadon to fill a five-litre bucket", ["KilnFire__scale_glaze_batch"]),
    ("honk the hooter on the tank engine", ["RailDeck__toggle_function"]),
    ("which sections of line have something parked on them", ["RailDeck__show_block_occupancy"]),
    ("have the little diesel go back and forth by itself between the two stations", ["RailDeck__run_automation"]),
    ("tweak the momentum setting stored on the Jinty's chip", ["RailDeck__program_cv"]),
    ("put volunteers on the poolside jobs for Saturday morning", ["SplitLane__assign_officials"]),
    ("paperwork for the timekeepers showing who goes where", ["SplitLane__print_heat_sheets"]),
    ("get the placings up on the web while it's happening", ["SplitLane__publish_live_results"]),
    ("Sam's not coming on Sunday, take him off the 50 back", ["SplitLane__scratch_swimmer"]),
    ("which of my aromachemicals smell like vanilla", ["ScentSmith__search_materials"]),
    ("how pricey is this blend per 50 ml", ["ScentSmith__calculate_cost"]),
    ("what did I alter between draft 3 and draft 4 of my oud accord", ["ScentSmith__compare_formulas"]),
    ("ping me when my Hedione bottle gets nearly empty", ["ScentSmith__track_inventory"]),
    ("freeze the clock, a player needs the loo", ["CluePanel__pause_timer"]),
    ("give team Blue a bit longer", ["CluePanel__add_time"]),
    ("snap a group picture of the winners", ["CluePanel__take_team_photo"]),
    ("Joe handed back his set on his last day", ["PinChart__return_key"]),
    ("could a flat's own copy accidentally work the plant room too", ["PinChart__check_cross_keying"]),
]

PARAM = [
    ("is any of lot 2231 sitting in quarantine? there's a recall", ["PalletPath__search_inventory"]),
    ("print ZPL for the new racking locations", ["PalletPath__print_labels"]),
    ("RMA 7781 came back fine, put it back on the shelf", ["PalletPath__process_return"]),
    ("use nearest empty bin for this pallet", ["PalletPath__putaway_stock"]),
    ("push Thursday's sale to LiveAuctioneers and Invaluable", ["BidHammer__publish_catalogue"]),
    ("bill this buyer under the margin scheme", ["BidHammer__generate_buyer_invoice"]),
    ("mention the foxing on the atlas pages", ["BidHammer__create_lot"]),
    ("MOT Type 1 is going up to 18 pounds", ["WeighGate__set_product_price"]),
    ("load of soil coming in under EWC 17 05 04", ["WeighGate__record_waste_transfer"]),
    ("this wool coat can't go in perc", ["PressTicket__set_cleaning_process"]),
    ("Mr Lee likes heavy starch and his shirts boxed", ["PressTicket__manage_customer"]),
    ("put unit 214's contents up on StorageTreasures", ["UnitStore__schedule_lien_auction"]),
    ("send it certified mail with a return receipt", ["UnitStore__send_lien_notice"]),
    ("the blower door came back at 3.2 ACH50", ["DuctLoad__set_infiltration"]),
    ("use Manual D at a 0.08 friction rate", ["DuctLoad__size_ducts"]),
    ("make a cone 6 schedule with Orton targets", ["KilnFire__create_firing_schedule"]),
    ("the elements read 9 ohms on the multimeter", ["KilnFire__log_element_use"]),
    ("add the new LokSound-fitted Class 66", ["RailDeck__add_locomotive"]),
    ("the clubs sent Lenex files", ["SplitLane__import_entries"]),
    ("is it OK for a Cat 4 product under the 51st amendment", ["ScentSmith__check_compliance"]),
    ("dilute the ambroxan to 10% in DPG", ["ScentSmith__set_dilution"]),
    ("walkie-talkie the players a clue", ["CluePanel__send_hint"]),
    ("cut these on the Silca Triax", ["PinChart__print_key_cutting_sheet"]),
]

NONE = [
    ("forecast next month's demand for each SKU", []),
    ("how many forklift drivers do we need for peak season", []),
    ("authenticate the signature on this painting", []),
    ("value this ring for probate from a photo", []),
    ("how much diesel did the haulier's trucks burn this month", []),
    ("hire a skip for a customer's driveway", []),
    ("recommend a detergent for a silk dress", []),
    ("order more hangers and poly bags from our supplier", []),
    ("run a background credit check on a new storage tenant", []),
    ("get three quotes from local installers for the heat pump", []),
    ("design a solar panel array for the roof", []),
    ("wire the thermostat to the heat pump", []),
    ("teach me how to centre clay on the wheel", []),
    ("find a clay supplier near me that delivers", []),
    ("buy a new Hornby locomotive from the online shop", []),
    ("solder the decoder into the loco", []),
    ("analyse my swimmer's stroke from the video", []),
    ("book a lane at the leisure centre for training", []),
    ("identify which perfume this is from its smell", []),
    ("write a new riddle for the vault puzzle", []),
    ("pick the jammed lock on my front door", []),
    ("cut a car key with a transponder chip", []),
    ("what's the weather tomorrow in Leeds", []),
    ("translate this letter into Spanish", []),
    ("remind me to call my mum at six", []),
]


def main():
    out = []
    for kind, rows in (("plain", PLAIN), ("typo", TYPO), ("realword", REALWORD), ("paraphrase", PARAPHRASE),
                       ("param", PARAM), ("none", NONE)):
        for q, exp in rows:
            out.append({"query": q, "expected": exp, "kind": kind})
    with open(os.path.join(HERE, "queries_blind12.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("queries_blind12.json", len(out), "queries")


if __name__ == "__main__":
    main()
