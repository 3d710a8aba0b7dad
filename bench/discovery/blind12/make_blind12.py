#!/usr/bin/env python3
"""Write the two blind12 catalogues (catalogue_depot.json, catalogue_guild.json).

Standalone (standard library only). Each app is a realistic desktop application with MCP-style
tools: snake_case names, a one-line description and a JSON-schema inputSchema whose properties
carry descriptions (some with enums)."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def S(desc, enum=None):
    d = {"type": "string", "description": desc}
    if enum:
        d["enum"] = list(enum)
    return d


def N(desc):
    return {"type": "number", "description": desc}


def I(desc):
    return {"type": "integer", "description": desc}


def B(desc):
    return {"type": "boolean", "description": desc}


def A(desc, item="string", enum=None):
    items = {"type": item}
    if enum:
        items["enum"] = list(enum)
    return {"type": "array", "description": desc, "items": items}


def T(name, desc, props, required=()):
    return {"name": name, "description": desc,
            "inputSchema": {"type": "object", "properties": props, "required": list(required)}}


# --------------------------------------------------------------------------- depot
PALLETPATH = [
    T("receive_shipment", "Receive an inbound shipment against a purchase order and record the quantities that arrived.", {
        "po_number": S("Purchase order or advance ship notice (ASN) number."),
        "dock_door": S("Dock door the trailer is unloading at."),
        "lines": A("Lines received, each with SKU, quantity, lot and best-before date.", "object"),
        "damaged": B("Flag crushed or wet cartons for a claim against the carrier."),
    }, ["po_number"]),
    T("putaway_stock", "Move received stock from the dock to a storage location.", {
        "license_plate": S("LPN barcode of the pallet or tote."),
        "location": S("Bin or rack location code, e.g. A-12-03."),
        "strategy": S("Putaway rule: system-directed, fixed home slot, or nearest empty bin.",
                      ["directed", "fixed", "nearest_empty"]),
    }, ["license_plate"]),
    T("create_pick_wave", "Group open orders into a wave and release pick lists to the floor.", {
        "order_ids": A("Orders to include; empty means all released orders."),
        "method": S("Picking method; cluster picking fills several totes on one cart.",
                    ["discrete", "batch", "zone", "cluster"]),
        "cutoff": S("Carrier collection cutoff time the wave must meet."),
    }),
    T("confirm_pick", "Confirm that an item was picked, or record a short pick.", {
        "task_id": S("Pick task shown on the handheld."),
        "quantity": I("Quantity actually picked."),
        "short_reason": S("Why fewer were picked than asked.", ["not_found", "damaged", "wrong_item"]),
    }, ["task_id", "quantity"]),
    T("pack_order", "Pack a picked order into cartons and print the packing slip.", {
        "order_id": S("Order to pack."),
        "carton_type": S("Box size to use; the system suggests one from item cube."),
        "weight_kg": N("Weight of the packed carton."),
        "dunnage": S("Void fill to add.", ["none", "air_pillows", "paper", "foam"]),
    }, ["order_id"]),
    T("ship_order", "Confirm shipment, buy a carrier label and send the tracking number to the customer.", {
        "order_id": S("Order to ship."),
        "carrier": S("Carrier; rate shopping picks the cheapest if omitted.",
                     ["ups", "fedex", "dhl", "usps", "royal_mail"]),
        "service_level": S("Service such as ground, next day air or Saturday delivery."),
    }, ["order_id"]),
    T("start_cycle_count", "Start a cycle count of selected locations and compare with the system quantity.", {
        "zone": S("Warehouse zone or aisle range."),
        "abc_class": S("Count only items of this ABC velocity class.", ["A", "B", "C"]),
        "blind": B("Hide the expected quantity from the counter."),
    }),
    T("adjust_inventory", "Adjust the on-hand quantity of a SKU with a reason code.", {
        "sku": S("Item code."),
        "location": S("Bin where the adjustment applies."),
        "delta": I("Change in units, negative to reduce."),
        "reason": S("Reason code for the audit trail.", ["shrinkage", "damage", "found", "write_off"]),
    }, ["sku", "delta", "reason"]),
    T("transfer_stock", "Move stock between locations or to another warehouse.", {
        "sku": S("Item code."),
        "from_location": S("Source bin or site."),
        "to_location": S("Destination bin or site."),
        "quantity": I("Units to move."),
    }, ["sku", "from_location", "to_location", "quantity"]),
    T("replenish_pick_faces", "Create replenishment tasks to refill pick faces from reserve storage.", {
        "zone": S("Zone to replenish."),
        "use_min_max": B("Trigger from min/max levels rather than tomorrow's demand."),
    }),
    T("search_inventory", "Search stock by SKU, description, lot or location.", {
        "query": S("Text to match."),
        "lot": S("Lot or batch number, e.g. to trace a recall."),
        "include_quarantine": B("Also show stock on hold in quarantine."),
    }),
    T("print_labels", "Print location, pallet or product labels.", {
        "label_type": S("Kind of label.", ["location", "pallet", "product", "shipping"]),
        "printer": S("Zebra or other thermal printer name."),
        "format": S("ZPL sent straight to the printer, or a PDF.", ["zpl", "pdf"]),
        "codes": A("Codes to print."),
    }, ["label_type"]),
    T("process_return", "Receive a customer return, inspect it and restock or scrap it.", {
        "rma_number": S("Return merchandise authorisation (RMA) number."),
        "disposition": S("What happens to the goods.", ["restock", "refurbish", "scrap", "return_to_vendor"]),
    }, ["rma_number"]),
    T("schedule_dock_appointment", "Book a dock door time slot for an inbound or outbound trailer.", {
        "carrier": S("Haulage company."),
        "door": S("Dock door, or leave empty to pick any free one."),
        "start_time": S("Slot start (ISO 8601)."),
        "direction": S("Unloading or loading.", ["inbound", "outbound"]),
    }, ["carrier", "start_time"]),
    T("export_inventory_report", "Export on-hand stock, ageing and valuation to a spreadsheet.", {
        "format": S("File format.", ["csv", "xlsx"]),
        "valuation": S("Costing method.", ["fifo", "lifo", "weighted_average"]),
    }),
    T("undo_last_scan", "Undo the last barcode scan on a handheld task.", {
        "device_id": S("Handheld terminal."),
        "task_id": S("Task the scan belonged to."),
    }, ["device_id"]),
]

BIDHAMMER = [
    T("add_consignment", "Record goods received from a consignor, with reserves and commission terms.", {
        "consignor_id": S("Seller consigning the goods."),
        "items": A("Items received, each with a short description.", "object"),
        "commission_rate": N("Seller's commission, percent of hammer."),
        "reserve": N("Lowest acceptable price; kept confidential."),
    }, ["consignor_id"]),
    T("create_lot", "Create a lot in a sale with description, estimate and photos.", {
        "sale_id": S("Sale the lot belongs to."),
        "title": S("Lot title as it appears in the catalogue."),
        "low_estimate": N("Low estimate."),
        "high_estimate": N("High estimate."),
        "condition_report": S("Condition notes: chips, restoration, foxing, provenance."),
    }, ["sale_id", "title"]),
    T("reorder_lots", "Renumber and reorder the lots in a sale catalogue.", {
        "sale_id": S("Sale to renumber."),
        "order_by": S("Sort rule.", ["consignor", "category", "estimate", "manual"]),
    }, ["sale_id"]),
    T("publish_catalogue", "Publish a sale catalogue online for bidding.", {
        "sale_id": S("Sale to publish."),
        "platforms": A("Bidding platforms such as the-saleroom, LiveAuctioneers or Invaluable.", "string",
                       ["website", "the_saleroom", "liveauctioneers", "invaluable"]),
    }, ["sale_id"]),
    T("register_bidder", "Register a bidder for a sale and assign a paddle number.", {
        "name": S("Bidder's full name."),
        "email": S("Contact email."),
        "id_checked": B("Photo ID and proof of address seen (anti-money-laundering)."),
        "card_on_file": B("A payment card is held for this bidder."),
    }, ["name"]),
    T("record_absentee_bid", "Record a commission (absentee) bid left before the sale.", {
        "lot_id": S("Lot the bid is for."),
        "bidder_id": S("Registered bidder."),
        "max_bid": N("Highest amount to bid on their behalf."),
        "phone_bid": B("Bidder wants to be telephoned during the sale instead."),
    }, ["lot_id", "bidder_id"]),
    T("open_lot", "Open bidding on the next lot on the auctioneer's clerking screen.", {
        "lot_id": S("Lot to open."),
        "starting_bid": N("Opening bid."),
        "increment": N("Bid step; leave empty to use the house increment table."),
    }, ["lot_id"]),
    T("record_hammer", "Record the hammer price and buyer when a lot is sold, or mark it passed.", {
        "lot_id": S("Lot just offered."),
        "price": N("Hammer price."),
        "paddle": S("Buyer's paddle number."),
        "status": S("Outcome.", ["sold", "passed", "withdrawn"]),
    }, ["lot_id", "status"]),
    T("generate_buyer_invoice", "Create an invoice for a buyer with hammer, buyer's premium and tax.", {
        "bidder_id": S("Buyer."),
        "premium_rate": N("Buyer's premium percent."),
        "vat_scheme": S("VAT margin scheme, standard rate or import VAT; artist's resale right added when due.",
                        ["margin", "standard", "import"]),
    }, ["bidder_id"]),
    T("settle_consignor", "Calculate and pay a consignor's settlement after the sale, net of commission and fees.", {
        "consignor_id": S("Seller to settle."),
        "method": S("Payment method.", ["bank_transfer", "cheque"]),
        "deduct_fees": A("Charges to deduct: photography, insurance, lotting."),
    }, ["consignor_id"]),
    T("search_lots", "Search past and upcoming lots by keyword, maker, category or price.", {
        "query": S("Keywords."),
        "sold_only": B("Only lots that sold."),
        "date_from": S("Earliest sale date."),
    }),
    T("import_lots", "Import lots from a spreadsheet or another auction system.", {
        "file": S("CSV or XLSX file."),
        "mapping": S("Column mapping preset."),
    }, ["file"]),
    T("export_results", "Export a sale's prices-realised list.", {
        "sale_id": S("Sale."),
        "format": S("File format.", ["pdf", "csv"]),
        "include_unsold": B("List unsold lots too."),
    }, ["sale_id"]),
    T("print_lot_tickets", "Print lot tickets and viewing labels for the saleroom.", {
        "sale_id": S("Sale."),
        "size": S("Ticket size.", ["small", "large", "shelf_strip"]),
    }, ["sale_id"]),
    T("arrange_shipping", "Request a shipping quote for a buyer's purchased lots.", {
        "bidder_id": S("Buyer."),
        "destination": S("Delivery address or country."),
        "packer": S("Third-party packer for crating and fine-art transport."),
    }, ["bidder_id"]),
]

WEIGHGATE = [
    T("capture_weight", "Read the current weight from the weighbridge indicator.", {
        "bridge_id": S("Weighbridge to read."),
        "stable_seconds": N("Wait this long for a stable reading (motion detection)."),
    }),
    T("weigh_in", "Record a vehicle's first weight on arrival and open a ticket.", {
        "registration": S("Vehicle number plate."),
        "haulier": S("Haulage firm."),
        "product": S("Material loaded or delivered."),
        "direction": S("Delivering to site or collecting from it.", ["inbound", "outbound"]),
    }, ["registration"]),
    T("weigh_out", "Record the second weight, compute the net and close the ticket.", {
        "ticket_id": S("Open ticket."),
        "use_stored_tare": B("Use the vehicle's stored empty weight instead of a second weighing."),
    }, ["ticket_id"]),
    T("store_tare", "Save a vehicle's tare weight for later single weighings.", {
        "registration": S("Vehicle number plate."),
        "tare_kg": N("Empty weight."),
        "expires_days": I("Days before it must be re-weighed."),
    }, ["registration", "tare_kg"]),
    T("print_ticket", "Print or reprint a weighbridge ticket.", {
        "ticket_id": S("Ticket."),
        "copies": I("Number of copies (driver, office, customer)."),
        "printer": S("Printer in the weighbridge office or the driver kiosk."),
    }, ["ticket_id"]),
    T("void_ticket", "Void an incorrect ticket with a reason.", {
        "ticket_id": S("Ticket."),
        "reason": S("Why it is void."),
    }, ["ticket_id", "reason"]),
    T("add_customer_account", "Create a customer account with a price list and credit limit.", {
        "name": S("Customer or company name."),
        "credit_limit": N("Credit limit."),
        "payment_terms": S("Terms.", ["cash", "account_30", "account_60"]),
        "po_required": B("Reject tickets without the customer's PO reference."),
    }, ["name"]),
    T("set_product_price", "Set the price per tonne of a product, per customer if needed.", {
        "product": S("Aggregate such as MOT Type 1, 20mm gravel, sharp sand or topsoil."),
        "price_per_tonne": N("Price."),
        "customer_id": S("Customer for a special rate; empty for the list price."),
    }, ["product", "price_per_tonne"]),
    T("check_overload", "Check a vehicle's gross weight against its legal maximum and axle limits.", {
        "registration": S("Vehicle number plate."),
        "gross_kg": N("Measured gross."),
        "axles": I("Number of axles; a 4-axle rigid tipper is limited to 32 t in the UK."),
    }, ["registration"]),
    T("record_waste_transfer", "Record a transfer note for incoming waste.", {
        "ewc_code": S("European Waste Catalogue (EWC) six-digit code."),
        "producer": S("Business that produced the waste."),
        "hazardous": B("Hazardous waste needing a consignment note."),
        "landfill_tax_band": S("Landfill tax band.", ["standard", "lower"]),
    }, ["ewc_code", "producer"]),
    T("search_tickets", "Search tickets by date, vehicle, customer or product.", {
        "query": S("Plate, customer or product."),
        "date_from": S("From date."),
        "date_to": S("To date."),
    }),
    T("export_tonnage_report", "Export tonnage totals by product, customer or haulier for a period.", {
        "group_by": S("Grouping.", ["product", "customer", "haulier"]),
        "period": S("Date range."),
        "format": S("File format; Sage exports post straight into accounts.", ["csv", "pdf", "sage"]),
    }),
    T("open_barrier", "Raise or lower the entry or exit barrier and set the traffic lights.", {
        "lane": S("Lane.", ["entry", "exit"]),
        "action": S("Raise or lower.", ["raise", "lower"]),
        "light": S("Traffic light colour.", ["red", "green"]),
    }, ["lane", "action"]),
    T("read_number_plate", "Read a vehicle's registration from the camera at the bridge.", {
        "camera_id": S("ANPR camera to use."),
        "min_confidence": N("Reject readings below this confidence."),
    }),
    T("calibrate_scale", "Record a calibration check with test weights and set zero.", {
        "test_weights_kg": N("Total certified test weights used."),
        "certificate": S("Trading Standards verification certificate number."),
        "zero_only": B("Only re-zero the indicator."),
    }),
]

PRESSTICKET = [
    T("create_order", "Take in garments at the counter and create a cleaning order.", {
        "customer_id": S("Customer."),
        "items": A("Garments, each with type, service and price.", "object"),
        "due_date": S("Promised ready date."),
        "express": S("Turnaround.", ["standard", "next_day", "same_day"]),
    }, ["customer_id", "items"]),
    T("tag_garments", "Print barcode tags for each garment in an order.", {
        "order_id": S("Order."),
        "tag_type": S("Tag kind.", ["paper", "heat_seal", "rfid"]),
    }, ["order_id"]),
    T("note_stain", "Note a stain, damage or missing button on a garment before cleaning.", {
        "garment_id": S("Garment."),
        "stain_type": S("Wine, grease, ink, blood and so on; passed to the spotter."),
        "location": S("Where on the garment."),
        "photo": S("Optional photo of the mark."),
    }, ["garment_id"]),
    T("set_cleaning_process", "Set the cleaning process for a garment.", {
        "garment_id": S("Garment."),
        "process": S("Process.", ["dry_clean", "wet_clean", "launder", "hand_wash"]),
        "solvent": S("Solvent: perchloroethylene (perc), hydrocarbon or GreenEarth silicone.",
                     ["perc", "hydrocarbon", "silicone"]),
    }, ["garment_id", "process"]),
    T("assemble_order", "Match cleaned garments back to their order on the assembly conveyor.", {
        "order_id": S("Order."),
        "slot": I("Conveyor slot number."),
        "bag": S("Poly bag length.", ["short", "long", "none"]),
    }, ["order_id"]),
    T("send_ready_text", "Text or email the customer that their order is ready to collect.", {
        "order_id": S("Order."),
        "channel": S("How to notify.", ["sms", "email"]),
    }, ["order_id"]),
    T("take_payment", "Take payment for an order at pickup or in advance.", {
        "order_id": S("Order."),
        "amount": N("Amount."),
        "method": S("Tender.", ["cash", "card", "account"]),
    }, ["order_id"]),
    T("schedule_pickup_delivery", "Schedule a van collection or home delivery for a customer.", {
        "customer_id": S("Customer."),
        "address": S("Address."),
        "window": S("Time window, e.g. 8-10am."),
        "route_day": S("Route day for regular route customers."),
    }, ["customer_id"]),
    T("search_orders", "Find orders by ticket number, customer name or phone.", {
        "query": S("Ticket number, name or phone."),
        "status": S("Filter.", ["in_process", "ready", "collected"]),
    }),
    T("record_alteration", "Add an alteration or repair job, such as hemming or a zip replacement.", {
        "garment_id": S("Garment."),
        "job": S("Job.", ["hem", "take_in", "let_out", "zip", "patch", "button"]),
        "tailor": S("Seamstress or tailor assigned."),
    }, ["garment_id", "job"]),
    T("log_claim", "Log a customer complaint or damage claim and its settlement.", {
        "order_id": S("Order."),
        "claim_type": S("Kind of claim.", ["damage", "lost", "shrinkage", "colour_loss"]),
        "settlement": S("Refund, re-clean or compensation from the Fair Claims Guide depreciation table."),
    }, ["order_id"]),
    T("manage_customer", "Create or update a customer with their finishing and packaging preferences.", {
        "name": S("Name."),
        "phone": S("Phone."),
        "starch": S("Shirt starch level.", ["none", "light", "medium", "heavy"]),
        "shirts": S("Shirts returned on hangers, folded or boxed.", ["hanger", "folded", "boxed"]),
    }, ["name"]),
    T("export_sales_report", "Export daily sales, piece counts and takings by service.", {
        "date_from": S("From date."),
        "date_to": S("To date."),
        "format": S("File format.", ["csv", "pdf"]),
    }),
    T("mark_unclaimed", "Flag orders not collected after a number of days for disposal or donation.", {
        "days": I("Days since ready."),
        "action": S("Action.", ["remind", "donate", "dispose"]),
    }, ["days"]),
    T("undo_last_change", "Undo the last change made to an order on the counter screen.", {
        "order_id": S("Order."),
    }, ["order_id"]),
]

UNITSTORE = [
    T("check_availability", "List vacant units by size, floor and climate control with current rates.", {
        "size": S("Unit size in feet.", ["5x5", "5x10", "10x10", "10x15", "10x20", "10x30"]),
        "climate_controlled": B("Only heated and cooled units."),
        "drive_up": B("Only ground-floor units with vehicle access."),
    }),
    T("rent_unit", "Rent a unit to a tenant (move-in) with the first month's charge and lease.", {
        "unit_id": S("Unit."),
        "tenant_id": S("Tenant."),
        "start_date": S("Move-in date."),
        "insurance_plan": S("Tenant protection or contents cover level."),
        "promo_code": S("Offer such as first month for $1."),
    }, ["unit_id", "tenant_id"]),
    T("move_out", "Process a move-out, inspect the unit and release it for rental.", {
        "unit_id": S("Unit."),
        "condition": S("Condition at inspection.", ["clean", "needs_cleaning", "damaged"]),
        "refund_deposit": B("Refund the security deposit."),
    }, ["unit_id"]),
    T("transfer_unit", "Move a tenant from one unit to another and carry over the balance.", {
        "tenant_id": S("Tenant."),
        "from_unit": S("Current unit."),
        "to_unit": S("New unit."),
    }, ["tenant_id", "to_unit"]),
    T("set_gate_code", "Set or change a tenant's keypad access code and access hours.", {
        "tenant_id": S("Tenant."),
        "code": S("New code."),
        "access_hours": S("Hours the gate admits this tenant."),
    }, ["tenant_id"]),
    T("lock_out_tenant", "Deny gate access and overlock a unit for non-payment.", {
        "unit_id": S("Unit."),
        "reason": S("Reason.", ["non_payment", "lease_breach", "investigation"]),
    }, ["unit_id"]),
    T("run_late_fees", "Apply late fees to overdue accounts.", {
        "as_of": S("Date to assess."),
        "fee_type": S("Flat or percentage fee.", ["flat", "percent"]),
    }),
    T("send_lien_notice", "Send the pre-lien or lien notice required before a unit's contents can be sold.", {
        "unit_id": S("Unit."),
        "notice": S("Which notice.", ["pre_lien", "lien", "sale"]),
        "delivery": S("Certified mail with return receipt, or email where state law allows.",
                      ["certified_mail", "email"]),
    }, ["unit_id", "notice"]),
    T("schedule_lien_auction", "Schedule a lien sale of a defaulted unit's contents.", {
        "unit_id": S("Unit."),
        "date": S("Sale date."),
        "platform": S("Online site such as StorageTreasures or Lockerfox, or on-site."),
    }, ["unit_id", "date"]),
    T("change_rent_rate", "Change the rent for a unit type or for existing tenants.", {
        "unit_type": S("Unit size or type."),
        "new_rate": N("New monthly rate."),
        "notice_days": I("Existing-customer increases need written notice, usually 30 days."),
    }, ["unit_type", "new_rate"]),
    T("search_tenants", "Find tenants by name, unit, phone or balance.", {
        "query": S("Name, unit or phone."),
        "delinquent_only": B("Only tenants who are behind."),
    }),
    T("take_payment", "Record a rent payment or set up autopay.", {
        "tenant_id": S("Tenant."),
        "amount": N("Amount."),
        "method": S("Tender.", ["cash", "card", "ach", "check"]),
        "autopay": B("Charge the card automatically each month."),
    }, ["tenant_id"]),
    T("sell_merchandise", "Sell boxes, tape, padlocks and other retail items at the counter.", {
        "items": A("Items and quantities.", "object"),
        "tenant_id": S("Charge to this tenant's account."),
    }, ["items"]),
    T("print_lease", "Print the rental agreement and addendums for signature.", {
        "tenant_id": S("Tenant."),
        "esign": B("Send for e-signature instead of printing."),
    }, ["tenant_id"]),
    T("export_occupancy_report", "Export physical and economic occupancy, vacancies and the rent roll.", {
        "as_of": S("Date."),
        "format": S("File format.", ["csv", "pdf", "xlsx"]),
    }),
    T("report_unit_issue", "Log a maintenance issue with a unit, door or gate.", {
        "unit_id": S("Unit or area."),
        "issue": S("Problem.", ["door_jammed", "leak", "pest", "lighting", "gate"]),
        "priority": S("Priority.", ["low", "normal", "urgent"]),
    }, ["issue"]),
]

DUCTLOAD = [
    T("create_project", "Create a heating and cooling design project for a building.", {
        "address": S("Site address."),
        "design_city": S("Location for outdoor design temperatures (ASHRAE 99% / 1%)."),
        "building_type": S("Building type.", ["residential", "light_commercial"]),
    }, ["address"]),
    T("add_room", "Add a room with its floor area, ceiling height and exposure.", {
        "name": S("Room name."),
        "area": N("Floor area."),
        "ceiling_height": N("Ceiling height."),
        "exposure": S("Main outside wall direction.", ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]),
    }, ["name", "area"]),
    T("set_wall_assembly", "Set the construction of a wall, roof or floor and its insulation.", {
        "assembly": S("Which surface.", ["wall", "roof", "floor", "slab"]),
        "r_value": N("Insulation R-value (or U-factor in metric projects)."),
        "construction": S("Build-up, e.g. 2x6 framing with blown cellulose."),
    }, ["assembly"]),
    T("add_window", "Add windows or glass doors to a room with size, orientation and shading.", {
        "room_id": S("Room."),
        "area": N("Glass area."),
        "shgc": N("Solar heat gain coefficient."),
        "u_factor": N("Thermal transmittance of the unit."),
        "overhang": N("Eave overhang depth."),
    }, ["room_id", "area"]),
    T("set_infiltration", "Set air leakage for the building from a test result or a tightness class.", {
        "ach50": N("Air changes per hour at 50 Pa from a blower-door test."),
        "class": S("Tightness class.", ["tight", "average", "leaky"]),
    }),
    T("calculate_loads", "Calculate room-by-room heating and cooling loads.", {
        "method": S("Load method: ACCA Manual J, CIBSE or EN 12831.", ["manual_j", "cibse", "en_12831"]),
        "include_latent": B("Include latent (moisture) load."),
    }),
    T("size_equipment", "Select furnace, heat pump or air conditioner capacity for the calculated load.", {
        "equipment_type": S("Equipment.", ["furnace", "heat_pump", "air_conditioner", "boiler"]),
        "oversize_limit": N("Maximum oversizing percent (Manual S)."),
    }, ["equipment_type"]),
    T("design_duct_layout", "Lay out supply and return duct runs between rooms and the air handler.", {
        "system": S("Layout style.", ["trunk_and_branch", "radial", "extended_plenum"]),
        "material": S("Duct material.", ["sheet_metal", "flex", "duct_board"]),
    }),
    T("size_ducts", "Size duct runs for the airflow each room needs.", {
        "friction_rate": N("Friction rate in inches of water column per 100 ft (Manual D)."),
        "max_velocity": N("Maximum air velocity in fpm."),
    }),
    T("check_static_pressure", "Check the system's total external static pressure against the fan rating.", {
        "filter_drop": N("Pressure drop across the filter."),
        "coil_drop": N("Pressure drop across the coil."),
        "blower": S("Fan table or ECM speed tap."),
    }),
    T("place_registers", "Place supply registers and return grilles in rooms and size them.", {
        "room_id": S("Room."),
        "type": S("Mounting.", ["floor", "ceiling", "sidewall"]),
        "max_noise": N("Noise criterion (NC) limit; throw is checked against room length."),
    }, ["room_id"]),
    T("compare_options", "Compare running cost and capacity of alternative systems.", {
        "options": A("Equipment options to compare."),
        "energy_prices": S("Electricity and gas tariffs per kWh or therm."),
        "efficiency": S("SEER2, HSPF2 or AFUE ratings of each option."),
    }, ["options"]),
    T("export_report", "Export the load calculation and duct design report.", {
        "format": S("File format.", ["pdf", "xml", "csv"]),
        "include_sections": A("Sections to include."),
    }),
    T("share_report", "Send the design report to a homeowner or contractor by link.", {
        "email": S("Recipient."),
        "allow_edit": B("Let the recipient change inputs."),
    }, ["email"]),
    T("import_floor_plan", "Import a floor plan to trace rooms from.", {
        "file": S("PDF, DXF or image of the plan."),
        "scale": S("Drawing scale, e.g. 1/4 in = 1 ft or 1:50."),
    }, ["file"]),
    T("undo_change", "Undo the last change to the design.", {
        "steps": I("How many changes to undo."),
    }),
]

# --------------------------------------------------------------------------- guild
KILNFIRE = [
    T("create_firing_schedule", "Create a firing schedule of ramp segments, target temperatures and holds.", {
        "name": S("Schedule name."),
        "segments": A("Each segment: rate per hour, target temperature, hold minutes.", "object"),
        "cone": S("Target pyrometric cone such as 06, 6 or 10 (Orton)."),
        "units": S("Temperature units.", ["celsius", "fahrenheit"]),
    }, ["name", "segments"]),
    T("start_firing", "Start a firing on a connected kiln with a chosen schedule.", {
        "kiln_id": S("Kiln."),
        "schedule_id": S("Schedule."),
        "delay_start_minutes": I("Delay before starting, e.g. to use off-peak power."),
        "type": S("Kind of load.", ["bisque", "glaze", "lustre", "raku"]),
    }, ["kiln_id", "schedule_id"]),
    T("stop_firing", "Stop a firing in progress and let the kiln cool.", {
        "kiln_id": S("Kiln."),
        "reason": S("Reason for the log."),
    }, ["kiln_id"]),
    T("skip_segment", "Skip to the next segment of the running schedule.", {
        "kiln_id": S("Kiln."),
    }, ["kiln_id"]),
    T("get_kiln_status", "Show live temperature, segment, elapsed time and element power of a kiln.", {
        "kiln_id": S("Kiln."),
    }, ["kiln_id"]),
    T("add_controlled_cool", "Add a slow controlled cooling segment to a schedule.", {
        "schedule_id": S("Schedule."),
        "rate": N("Degrees per hour."),
        "down_to": N("Temperature to cool to, e.g. for matt glazes or crystalline growth."),
    }, ["schedule_id", "rate"]),
    T("log_firing_result", "Record how a firing came out, with witness cones and notes.", {
        "firing_id": S("Firing."),
        "witness_cones": S("Cone pack bend, e.g. 5 down, 6 at 3 o'clock, 7 standing."),
        "defects": A("Faults seen.", "string",
                     ["crawling", "pinholing", "crazing", "shivering", "blistering", "running"]),
        "notes": S("Notes."),
    }, ["firing_id"]),
    T("add_glaze_recipe", "Add a glaze recipe with ingredients as percentages.", {
        "name": S("Glaze name."),
        "ingredients": A("Materials and amounts, e.g. Custer feldspar 25, silica 20, whiting 18, EPK 15.", "object"),
        "additions": A("Colourants such as cobalt carbonate or rutile, on top of 100.", "object"),
        "cone": S("Firing cone."),
    }, ["name", "ingredients"]),
    T("calculate_unity_formula", "Calculate the unity molecular formula, silica:alumina ratio and thermal expansion of a glaze.", {
        "recipe_id": S("Glaze recipe."),
        "materials_db": S("Materials database for oxide analyses.", ["digitalfire", "glazy", "custom"]),
    }, ["recipe_id"]),
    T("scale_glaze_batch", "Scale a glaze recipe to a batch weight and print the weighing sheet.", {
        "recipe_id": S("Glaze recipe."),
        "batch_grams": N("Total dry weight."),
        "specific_gravity": N("Target SG for dipping."),
    }, ["recipe_id", "batch_grams"]),
    T("add_clay_body", "Record a clay body with shrinkage, absorption and firing range.", {
        "name": S("Clay name."),
        "shrinkage_percent": N("Total shrinkage."),
        "absorption_percent": N("Water absorption when fired."),
        "supplier": S("Supplier, e.g. Potclays, Valentine or Standard Ceramic."),
    }, ["name"]),
    T("plan_kiln_load", "Plan which pieces go on which shelf for the next firing.", {
        "pieces": A("Pieces to load."),
        "shelves": I("Number of shelves."),
        "posts": S("Post heights available."),
        "wadding": B("Use wadding under pieces that may stick."),
    }, ["pieces"]),
    T("track_piece", "Track a pot through its stages from thrown to fired.", {
        "piece_id": S("Piece."),
        "stage": S("Stage.", ["greenware", "leather_hard", "bone_dry", "bisqued", "glazed", "fired"]),
        "photo": S("Photo."),
    }, ["piece_id", "stage"]),
    T("log_element_use", "Log element resistance and firing count to predict when to replace elements.", {
        "kiln_id": S("Kiln."),
        "ohms": N("Measured resistance of each element with a multimeter."),
        "relay_cycles": I("Relay switching count."),
    }, ["kiln_id"]),
    T("export_firing_log", "Export temperature curves and firing history.", {
        "format": S("File format.", ["csv", "pdf", "png"]),
        "firing_ids": A("Firings to include."),
    }),
    T("share_recipe", "Share a glaze recipe by link or to the community site.", {
        "recipe_id": S("Glaze recipe."),
        "visibility": S("Who can see it.", ["link", "public", "studio"]),
        "include_photos": B("Include test tile photos."),
    }, ["recipe_id"]),
]

RAILDECK = [
    T("add_locomotive", "Add a locomotive to the roster with its decoder address and functions.", {
        "name": S("Name or class."),
        "address": I("DCC short or long address."),
        "decoder": S("Decoder make, e.g. ESU LokSound, Zimo or Digitrax."),
        "scale": S("Modelling scale.", ["N", "OO", "HO", "O", "G"]),
    }, ["name", "address"]),
    T("set_throttle", "Set a locomotive's speed and direction.", {
        "loco_id": S("Locomotive."),
        "speed_step": I("0-126 in 128-step mode."),
        "direction": S("Direction.", ["forward", "reverse"]),
        "momentum": B("Apply decoder momentum."),
    }, ["loco_id"]),
    T("toggle_function", "Turn a locomotive function on or off, such as lights or sound.", {
        "loco_id": S("Locomotive."),
        "function_number": I("F0-F28; F2 is often the horn or whistle."),
        "state": S("On or off.", ["on", "off"]),
    }, ["loco_id", "function_number"]),
    T("emergency_stop", "Stop every train on the layout immediately and cut track power.", {
        "scope": S("Whole layout or one power district.", ["all", "district"]),
    }),
    T("throw_turnout", "Set a turnout (point) to closed or thrown.", {
        "turnout_id": S("Turnout."),
        "position": S("Position.", ["closed", "thrown"]),
    }, ["turnout_id", "position"]),
    T("set_route", "Set a route that throws several turnouts and signals at once.", {
        "route_id": S("Route."),
        "lock": B("Lock the route until released (interlocking)."),
    }, ["route_id"]),
    T("set_signal_aspect", "Set a signal to an aspect.", {
        "signal_id": S("Signal."),
        "aspect": S("Aspect: stop, caution, preliminary caution or clear.",
                    ["red", "yellow", "double_yellow", "green"]),
    }, ["signal_id", "aspect"]),
    T("program_cv", "Read or write a decoder configuration variable (CV).", {
        "loco_id": S("Locomotive."),
        "cv_number": I("e.g. CV1 address, CV3 acceleration, CV29 configuration."),
        "value": I("Value to write; omit to read."),
        "track": S("Programming track, or programming on the main (POM).", ["programming", "main"]),
    }, ["loco_id", "cv_number"]),
    T("show_block_occupancy", "Show which track blocks are occupied from the detection sensors.", {
        "district": S("Power district or panel."),
    }),
    T("run_automation", "Run an automated sequence, such as a shuttle or timetabled movements.", {
        "script_id": S("Sequence."),
        "loop": B("Repeat until stopped."),
    }, ["script_id"]),
    T("build_consist", "Link locomotives to run as one (multiple unit or double-heading).", {
        "lead_loco": S("Lead locomotive."),
        "locos": A("Other locomotives."),
        "reversed": A("Locomotives that run backwards in the consist."),
    }, ["lead_loco", "locos"]),
    T("schedule_operating_session", "Plan an operating session with car cards, waybills and a fast clock.", {
        "date": S("Session date."),
        "fast_clock_ratio": S("Fast clock ratio, e.g. 4:1."),
        "crews": I("Number of operators."),
    }, ["date"]),
    T("search_roster", "Search locomotives and rolling stock by name, road number or railway company.", {
        "query": S("Text."),
        "livery": S("Livery, e.g. BR green or Santa Fe warbonnet."),
    }),
    T("import_layout", "Import a track plan or panel from another program.", {
        "file": S("AnyRail, SCARM or JMRI panel XML file."),
        "format": S("Format.", ["anyrail", "scarm", "jmri"]),
    }, ["file"]),
    T("export_roster", "Export the locomotive roster and decoder settings.", {
        "format": S("File format.", ["csv", "jmri_xml", "pdf"]),
    }),
    T("undo_panel_edit", "Undo the last change in the control panel editor.", {
        "steps": I("How many edits to undo."),
    }),
]

SPLITLANE = [
    T("create_meet", "Create a swim meet with dates, pool, course and sanction.", {
        "name": S("Meet name."),
        "course": S("Short course metres, long course metres or short course yards.", ["SCM", "LCM", "SCY"]),
        "lanes": I("Lanes in use."),
        "sanction_number": S("Licence from the governing body, e.g. Swim England or USA Swimming."),
    }, ["name", "course"]),
    T("add_event", "Add an event to the meet programme.", {
        "distance": I("Distance."),
        "stroke": S("Stroke.", ["freestyle", "backstroke", "breaststroke", "butterfly", "individual_medley"]),
        "gender": S("Gender.", ["girls", "boys", "mixed"]),
        "age_group": S("Age group, e.g. 11-12."),
        "relay": B("Relay event."),
    }, ["distance", "stroke"]),
    T("import_entries", "Import club entries from a file sent by each team.", {
        "file": S("Hy-Tek .hy3/.cl2, SDIF or Lenex .lxf file."),
        "overwrite": B("Replace that club's earlier entries."),
    }, ["file"]),
    T("enter_swimmer", "Enter a swimmer in an event with their entry time.", {
        "swimmer_id": S("Swimmer."),
        "event_id": S("Event."),
        "entry_time": S("Entry time, e.g. 1:05.32, or NT."),
        "bonus": B("Bonus event that does not count toward the entry limit."),
    }, ["swimmer_id", "event_id"]),
    T("check_qualifying_times", "Check entries against the meet's qualifying and cut-off times.", {
        "standard": S("Time standard, e.g. county or consideration times."),
        "convert_course": B("Convert times between 25 m, 50 m and yards pools before checking."),
    }),
    T("seed_heats", "Seed swimmers into heats and lanes by entry time.", {
        "event_id": S("Event."),
        "method": S("Circle-seed the fastest heats for prelims, or seed as a timed final.",
                    ["timed_final", "prelim_final", "circle_seeding"]),
        "fastest_heat_last": B("Fastest heat swims last."),
    }, ["event_id"]),
    T("scratch_swimmer", "Withdraw a swimmer from an event before it is swum.", {
        "swimmer_id": S("Swimmer."),
        "event_id": S("Event."),
        "reason": S("Reason."),
    }, ["swimmer_id", "event_id"]),
    T("record_results", "Record finishing times for a heat from the touchpads or stopwatches.", {
        "heat_id": S("Heat."),
        "source": S("Timing source.", ["touchpads", "buttons", "stopwatches"]),
        "times": A("Times by lane.", "object"),
    }, ["heat_id"]),
    T("disqualify_swimmer", "Disqualify a swimmer for a stroke or turn infringement.", {
        "swimmer_id": S("Swimmer."),
        "heat_id": S("Heat."),
        "code": S("DQ code, e.g. one-hand touch in breaststroke, false start, early take-off in a relay."),
    }, ["swimmer_id", "heat_id", "code"]),
    T("score_team_points", "Score team points from places in each event.", {
        "scoring": S("What counts.", ["individual", "relay", "combined"]),
        "points_table": S("Points per place, e.g. 9-7-6-5-4-3-2-1."),
    }),
    T("print_heat_sheets", "Print heat sheets and lane timer sheets.", {
        "session": S("Session."),
        "format": S("Layout.", ["programme", "lane_timer", "marshalling"]),
    }),
    T("publish_live_results", "Publish results live to a website or app during the meet.", {
        "target": S("e.g. Meet Mobile or a club website."),
        "interval_seconds": I("Upload interval."),
    }),
    T("generate_records_report", "Report new records and personal bests set at the meet.", {
        "level": S("Record level.", ["club", "county", "regional", "national"]),
    }),
    T("export_results", "Export results for the governing body's rankings database.", {
        "format": S("File format.", ["lenex", "sdif", "pdf", "csv"]),
    }),
    T("assign_officials", "Assign officials such as referee, starter and stroke and turn judges to sessions.", {
        "session": S("Session."),
        "roles": A("Roles and names.", "object"),
    }, ["session"]),
]

SCENTSMITH = [
    T("create_formula", "Create a fragrance formula with ingredients in parts or percent.", {
        "name": S("Formula name."),
        "ingredients": A("Material and amount; e.g. Iso E Super, Hedione, ambroxan.", "object"),
        "units": S("Units.", ["parts", "percent", "grams", "drops"]),
    }, ["name"]),
    T("add_material", "Add a raw material with supplier, odour profile and price.", {
        "name": S("Material name."),
        "cas_number": S("CAS registry number."),
        "supplier": S("Supplier, e.g. Firmenich, Givaudan or Perfumer's Apprentice."),
        "odour_family": S("Family.", ["citrus", "floral", "woody", "amber", "musk", "green", "fruity",
                                      "gourmand", "aldehydic"]),
        "tenacity_hours": N("How long it lasts on a strip."),
    }, ["name"]),
    T("set_dilution", "Record a material's dilution in a solvent.", {
        "material_id": S("Material."),
        "percent": N("Strength."),
        "solvent": S("Perfumer's alcohol, dipropylene glycol (DPG), IPM or TEC.", ["ethanol", "dpg", "ipm", "tec"]),
    }, ["material_id", "percent"]),
    T("check_compliance", "Check a formula against usage limits for a product type.", {
        "formula_id": S("Formula."),
        "category": S("IFRA product category, e.g. Cat 4 fine fragrance or Cat 9 soap."),
        "amendment": S("IFRA amendment, e.g. 51st."),
    }, ["formula_id", "category"]),
    T("list_allergens", "List declarable allergens in a finished product and their amounts.", {
        "formula_id": S("Formula."),
        "concentration": N("Oil percentage in the finished product."),
        "region": S("Rules: EU Cosmetics Regulation (leave-on above 0.001%), UK or US.", ["eu", "uk", "us"]),
    }, ["formula_id"]),
    T("scale_formula", "Scale a formula to a target batch size and print a weighing sheet.", {
        "formula_id": S("Formula."),
        "batch_grams": N("Batch size."),
        "concentration": S("Extrait, eau de parfum, eau de toilette or cologne.", ["parfum", "edp", "edt", "edc"]),
    }, ["formula_id", "batch_grams"]),
    T("log_maceration", "Track how long a batch has been resting before filtering and bottling.", {
        "batch_id": S("Batch."),
        "start_date": S("Date mixed."),
        "chill_filter": B("Chill and filter before bottling."),
    }, ["batch_id"]),
    T("record_smell_test", "Record evaluation notes on a blotter over time: top, heart and base.", {
        "formula_id": S("Formula."),
        "hour": N("Hours after dipping."),
        "notes": S("Impressions."),
        "rating": I("1-10."),
        "skin": B("Worn on skin rather than a strip."),
    }, ["formula_id"]),
    T("compare_formulas", "Compare two versions of a formula side by side and show the differences.", {
        "formula_a": S("First formula or version."),
        "formula_b": S("Second formula or version."),
    }, ["formula_a", "formula_b"]),
    T("calculate_cost", "Calculate the cost of a formula per kilogram and per bottle.", {
        "formula_id": S("Formula."),
        "bottle_ml": N("Bottle size."),
        "currency": S("Currency.", ["GBP", "EUR", "USD"]),
    }, ["formula_id"]),
    T("search_materials", "Search raw materials by name, odour note, CAS number or supplier.", {
        "query": S("Text."),
        "in_stock": B("Only materials on the shelf."),
    }),
    T("import_formula", "Import a formula from a spreadsheet or another formulation program.", {
        "file": S("File."),
        "format": S("Format.", ["csv", "xlsx", "json"]),
    }, ["file"]),
    T("export_safety_data_sheet", "Generate a safety data sheet and labelling for a finished product.", {
        "formula_id": S("Formula."),
        "pictograms": B("Include GHS/CLP hazard pictograms such as flammable."),
        "language": S("Language."),
    }, ["formula_id"]),
    T("track_inventory", "Track stock of each material and warn when running low.", {
        "material_id": S("Material."),
        "quantity_grams": N("Amount on hand."),
        "reorder_level": N("Warn below this."),
    }, ["material_id"]),
    T("undo_formula_edit", "Undo the last edit to a formula.", {
        "formula_id": S("Formula."),
    }, ["formula_id"]),
]

CLUEPANEL = [
    T("start_game", "Start a game in a room and begin the countdown timer.", {
        "room_id": S("Room."),
        "team_name": S("Team name."),
        "players": I("Number of players."),
        "duration_minutes": I("Game length, usually 60."),
    }, ["room_id"]),
    T("pause_timer", "Pause or resume a room's countdown.", {
        "room_id": S("Room."),
        "action": S("Pause or resume.", ["pause", "resume"]),
    }, ["room_id", "action"]),
    T("add_time", "Add or remove minutes from the clock.", {
        "room_id": S("Room."),
        "minutes": I("Minutes; negative removes."),
    }, ["room_id", "minutes"]),
    T("send_hint", "Send a hint to the players' screen or speaker.", {
        "room_id": S("Room."),
        "text": S("Hint text."),
        "delivery": S("Screen, recorded audio or walkie-talkie.", ["screen", "audio", "walkie"]),
        "penalty_seconds": I("Time penalty for the hint."),
    }, ["room_id", "text"]),
    T("trigger_prop", "Trigger a prop or effect manually, such as opening a lock or playing a sound.", {
        "room_id": S("Room."),
        "prop_id": S("Maglock, relay, solenoid, fog machine or light."),
        "action": S("Action.", ["open", "close", "on", "off", "reset"]),
    }, ["room_id", "prop_id"]),
    T("reset_room", "Reset all props, locks and puzzles before the next group.", {
        "room_id": S("Room."),
        "checklist": B("Show the reset checklist: relock padlocks, re-hide items."),
    }, ["room_id"]),
    T("view_camera", "Show live camera feeds from a room.", {
        "room_id": S("Room."),
        "camera": S("Camera name."),
        "night_mode": B("Infrared view."),
    }, ["room_id"]),
    T("get_puzzle_progress", "Show which puzzles a team has solved and how long each took.", {
        "room_id": S("Room."),
    }, ["room_id"]),
    T("mark_puzzle_solved", "Mark a puzzle as solved by hand when a sensor fails.", {
        "room_id": S("Room."),
        "puzzle_id": S("Puzzle."),
    }, ["room_id", "puzzle_id"]),
    T("end_game", "End a game as escaped or failed and record the time.", {
        "room_id": S("Room."),
        "outcome": S("Outcome.", ["escaped", "failed", "aborted"]),
    }, ["room_id", "outcome"]),
    T("take_team_photo", "Take the team photo and add the time overlay.", {
        "room_id": S("Room."),
        "frame": S("Branded frame, e.g. 'We escaped!' or 'So close!' signs."),
        "email_to": A("Addresses to send it to."),
    }, ["room_id"]),
    T("schedule_prop_maintenance", "Schedule maintenance or a battery change for a prop.", {
        "prop_id": S("Prop."),
        "date": S("Date."),
        "task": S("Task."),
    }, ["prop_id"]),
    T("show_leaderboard", "Show the fastest escape times for a room.", {
        "room_id": S("Room."),
        "period": S("Period.", ["week", "month", "year", "all_time"]),
    }),
    T("export_game_stats", "Export game history, hint counts and success rates.", {
        "format": S("File format.", ["csv", "xlsx"]),
        "date_from": S("From date."),
    }),
    T("broadcast_message", "Play an announcement in one room or all rooms.", {
        "room_id": S("Room; empty for all."),
        "text": S("Announcement text."),
        "voice": S("Text-to-speech voice."),
    }, ["text"]),
]

PINCHART = [
    T("create_key_system", "Create a master key system with its keyway and hierarchy levels.", {
        "name": S("System name."),
        "keyway": S("Keyway or profile, e.g. Schlage C, Kwikset KW1, Yale or Abloy Protec."),
        "levels": I("Levels: great grand master, grand master, master, change key."),
        "pins": I("Number of pin chambers."),
    }, ["name", "keyway"]),
    T("add_door", "Add a door or lock to the system with its location and cylinder type.", {
        "door_name": S("Door name or number."),
        "building": S("Building and floor."),
        "cylinder": S("Euro profile, mortise, rim, key-in-knob, padlock or interchangeable core (SFIC).",
                      ["euro_profile", "mortise", "rim", "kik", "padlock", "ic_core"]),
    }, ["door_name"]),
    T("generate_bitting", "Generate change key bittings from the master key under manufacturer rules.", {
        "system_id": S("Key system."),
        "method": S("Total position progression or rotating constant.", ["tpp", "rcm"]),
        "maccs": I("Maximum adjacent cut specification."),
        "exclude": A("Cut combinations to avoid."),
    }, ["system_id"]),
    T("build_pinning_chart", "Compute the bottom, master and top pins for each cylinder.", {
        "door_id": S("Door."),
        "pin_kit": S("Pin kit in use, e.g. Schlage .015 increments."),
        "master_wafers": B("Use master wafers rather than master pins."),
    }, ["door_id"]),
    T("set_key_access", "Set which keys open which doors in the access matrix.", {
        "key_id": S("Key symbol."),
        "doors": A("Doors it should open."),
    }, ["key_id", "doors"]),
    T("issue_key", "Issue a numbered key to a person and record their signature.", {
        "key_id": S("Key symbol."),
        "holder": S("Person receiving it."),
        "copy_number": I("Stamped copy number."),
        "deposit": N("Deposit taken."),
    }, ["key_id", "holder"]),
    T("return_key", "Record a key returned by its holder.", {
        "key_id": S("Key symbol."),
        "holder": S("Person returning it."),
        "condition": S("Condition.", ["good", "worn", "bent"]),
    }, ["key_id"]),
    T("report_lost_key", "Report a lost key and list the cylinders that need rekeying.", {
        "key_id": S("Key symbol."),
        "rekey": S("When to rekey.", ["now", "later", "none"]),
    }, ["key_id"]),
    T("rekey_cylinder", "Change a cylinder to a new bitting so old keys no longer work.", {
        "door_id": S("Door."),
        "new_bitting": S("New bitting, or leave empty for the next unused one."),
        "construction_core": B("Swap a construction core for the permanent core."),
    }, ["door_id"]),
    T("search_keys", "Search keys and holders by key symbol, person or door.", {
        "query": S("Text."),
        "include_returned": B("Include keys already handed back."),
    }),
    T("print_key_cutting_sheet", "Print key-cutting sheets with the stamping and bitting for each key.", {
        "key_ids": A("Keys to cut."),
        "machine": S("Code cutter such as HPC Blitz or Silca Triax."),
        "stamp_dnd": B("Stamp 'Do Not Duplicate'."),
    }, ["key_ids"]),
    T("audit_key_holders", "List who holds which keys and flag overdue or unreturned keys.", {
        "building": S("Building."),
        "overdue_days": I("Flag keys held longer than this by contractors."),
    }),
    T("import_door_schedule", "Import a door list from a spreadsheet or an architect's hardware schedule.", {
        "file": S("File."),
        "mapping": S("Column mapping."),
    }, ["file"]),
    T("export_key_system", "Export the key system, bitting list and key holder register.", {
        "format": S("File format.", ["pdf", "csv", "xlsx"]),
        "include_bittings": B("Bittings are sensitive; leave off for a copy sent to a client."),
    }),
    T("check_cross_keying", "Find unwanted interchange where one change key opens another door.", {
        "system_id": S("Key system."),
        "tolerance": N("Cut depth tolerance for worn keys."),
    }, ["system_id"]),
]


def write(name, apps):
    cat = {"apps": [{"name": n, "tools": tools} for n, tools in apps]}
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(cat, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(name, len(apps), "apps", sum(len(t) for _, t in apps), "tools")


if __name__ == "__main__":
    write("catalogue_depot.json", [("PalletPath", PALLETPATH), ("BidHammer", BIDHAMMER), ("WeighGate", WEIGHGATE),
                                   ("PressTicket", PRESSTICKET), ("UnitStore", UNITSTORE), ("DuctLoad", DUCTLOAD)])
    write("catalogue_guild.json", [("KilnFire", KILNFIRE), ("RailDeck", RAILDECK), ("SplitLane", SPLITLANE),
                                   ("ScentSmith", SCENTSMITH), ("CluePanel", CLUEPANEL), ("PinChart", PINCHART)])
