#!/usr/bin/env python3
"""gen_data.py - synthetic tool-calling data for needle's bundled default model.

Writes train/val/test JSONL files in the fine-tuning row format
    {"query", "tools", "answers", "reasoning"?, "system"?}
(SPEC.md section 7) plus stats.json with the rendered chat text lengths.

Python 3 standard library only (an optional --spm flag counts real tokens with
the sentencepiece package when it is installed). Deterministic for a --seed.

How it works, in short:
  * TOOLS is a catalogue of ~50 on-device tools (JSON Schema parameters).
  * INTENTS are phrasing templates per tool. A template has {slots}; each slot
    sampler returns the text it inserts AND the arguments that text implies,
    so argument values are copied from the query by construction. The only
    values that are not literal copies are documented "derived" values:
    booleans, enum choices, ISO dates/times resolved from the text (relative
    dates only when a `date:` system fact is present), currency codes, and a
    location taken from a `location:` system fact.
  * A "combination" is (intent, template, slot texts). Every combination is
    hashed into exactly one split, so train/val/test never share one.
  * About 1 row in 8 is off-topic (chit-chat, unsupported asks, or a request
    whose tool is not in the declared set) and is answered with [].
"""
import argparse
import datetime
import hashlib
import json
import os
import random
import re
import sys

# ---------------------------------------------------------------------------
# Value pools. Values are what a user would type; several contain non-ASCII
# characters on purpose (the C JSON/tokenizer path must handle \\u escapes).
# ---------------------------------------------------------------------------
ROOMS = ["kitchen", "living room", "bedroom", "bathroom", "office", "hallway", "garage",
         "dining room", "kids room", "porch", "basement", "guest room", "nursery", "patio",
         "attic", "laundry room", "den", "study", "master bedroom", "backyard", "playroom",
         "front yard", "garden", "upstairs hallway", "loft"]
COLORS = ["white", "warm white", "red", "orange", "yellow", "green", "blue", "purple", "pink", "cyan"]
DOORS = ["front door", "back door", "garage door", "side door", "patio door", "basement door"]
FIRST = ["Sarah", "Mike", "Priya", "James", "Olivia", "Liam", "Emma", "Noah", "Ava", "Lucas", "Mia",
         "Ethan", "Sofia", "Mateo", "Chloe", "Daniel", "Hannah", "Omar", "Yuki", "Wei", "Fatima",
         "Diego", "Anna", "Tom", "Grace", "Ben", "Lena", "Raj", "Nina", "Leo", "Zoë", "José", "Aisha",
         "Kenji", "Maya", "Sam", "Carlos", "Ingrid", "Tariq", "Rosa"]
LAST = ["Johnson", "Patel", "Nguyen", "Garcia", "Smith", "Kim", "Müller", "Rossi", "Okafor", "Cohen",
        "Silva", "Tanaka", "Brown", "Lee", "Martin", "Novak", "Haddad", "Fischer", "Lopez", "Wright",
        "Khan", "Dubois", "Ivanova", "O'Brien", "Chen", "Schmidt"]
FAMILY = ["Mom", "Dad", "Grandma", "Grandpa", "Auntie Jo", "Uncle Ray"]
CITIES = ["Paris", "London", "Tokyo", "New York", "San Francisco", "Berlin", "Madrid", "Toronto",
          "Sydney", "Chicago", "Seattle", "Austin", "Boston", "Mumbai", "Lagos", "Mexico City", "Rome",
          "Amsterdam", "Dublin", "Seoul", "Singapore", "Cape Town", "Denver", "Lisbon", "Vienna",
          "Oslo", "Nairobi", "Buenos Aires", "Montreal", "Zurich", "São Paulo", "Reykjavík", "Kyoto",
          "Portland", "Miami", "Edinburgh"]
MESSAGES = ["I'm running 10 minutes late", "see you at the station", "can you pick up milk on the way home",
            "happy birthday!", "the meeting moved to Thursday", "I'll call you back later", "dinner is ready",
            "don't forget the tickets", "I just landed", "thanks for today", "are we still on for lunch",
            "I left the keys under the mat", "call me when you're free", "good luck with the interview",
            "on my way", "the kids are asleep", "running late, start without me", "where are you",
            "I'm outside", "love you", "can we reschedule to Monday", "the package arrived",
            "bring a jacket, it's cold", "I got the job!", "parking is on level 2"]
SONGS = ["Bohemian Rhapsody", "Blinding Lights", "Clair de Lune", "Hotel California", "Yesterday",
         "Shape of You", "Take Five", "Dancing Queen", "Wonderwall", "Superstition", "Billie Jean",
         "Hey Jude", "Purple Rain", "Levitating", "Imagine", "Despacito", "Halo", "Africa", "Jolene",
         "Vogue", "Redbone", "Roxanne"]
ARTISTS = ["Taylor Swift", "Miles Davis", "Beyoncé", "The Beatles", "Adele", "Daft Punk", "Nina Simone",
           "Coldplay", "Bad Bunny", "Radiohead", "Fleetwood Mac", "Kendrick Lamar", "Norah Jones",
           "Queen", "Stevie Wonder", "Billie Eilish", "Bob Marley", "Dua Lipa", "Ed Sheeran", "ABBA"]
PLAYLISTS = ["chill vibes", "workout mix", "focus", "morning coffee", "road trip", "jazz classics",
             "sleep sounds", "party hits", "rainy day", "90s rock", "deep work", "summer hits"]
PODCASTS = ["The Daily", "Radiolab", "Hardcore History", "Planet Money", "99% Invisible", "Serial",
            "Freakonomics Radio", "Science Vs", "How I Built This", "Reply All", "Lex Fridman"]
STATIONS = ["BBC Radio 1", "NPR", "KEXP", "Jazz FM", "Classic FM", "WNYC", "Radio Paradise", "KCRW",
            "Capital FM", "Radio Nova"]
DESTINATIONS = ["the airport", "Central Station", "Union Square", "the office", "the hotel", "the nearest hospital",
                "Golden Gate Park", "the museum", "123 Main Street", "the gym", "downtown", "the mall",
                "Pier 39", "the library", "Oak Street Cafe", "the stadium", "Times Square", "the beach",
                "48 Baker Street", "the train station", "Kings Cross"]
PLACE_KINDS = ["coffee shops", "gas stations", "pharmacies", "sushi restaurants", "ATMs", "parking",
               "grocery stores", "bakeries", "EV chargers", "pizza places", "hardware stores", "vet clinics",
               "bookstores", "playgrounds", "thai food", "a laundromat", "a post office", "bike shops"]
NEAR = ["Union Square", "downtown", "the airport", "Main Street", "my hotel", "the train station",
        "Shibuya", "Soho", "the stadium", "Central Park", "the office", "Market Street"]
MODES = ["driving", "walking", "transit", "cycling"]
NOTES = ["buy a birthday present for Anna", "the wifi password is blue-river-42",
         "ideas for the garden: tomatoes, basil and mint", "call the plumber about the leak",
         "parking spot is level 3 row C", "book club picks: Dune and Circe", "renew the passport before June",
         "Leo's shoe size is 32", "gate code is 4512", "try the ramen place on 5th street",
         "return the library books", "pack chargers and sunscreen", "ask about the refund",
         "the landlord's number is 555-0188"]
NOTE_TITLES = ["groceries", "trip ideas", "passwords", "work", "gift ideas", "recipes", "to do", "house"]
REMINDERS = ["take out the trash", "call the dentist", "water the plants", "pick up the dry cleaning",
             "pay the electricity bill", "take my medicine", "feed the cat", "submit the expense report",
             "buy flowers for Mom", "move the car", "check the oven", "stretch", "call Grandma",
             "book the vet", "charge the car", "send the invoice", "renew the gym membership"]
ITEMS = ["milk", "eggs", "bread", "bananas", "coffee", "olive oil", "rice", "toilet paper", "dish soap",
         "apples", "chicken", "tomatoes", "butter", "cheese", "yogurt", "onions", "pasta", "orange juice",
         "cereal", "spinach", "batteries", "shampoo", "paper towels", "avocados", "garlic", "flour", "sugar",
         "tea", "crème fraîche", "jalapeños"]
LISTS = ["groceries", "Costco", "party", "hardware", "weekend", "Trader Joe's", "pharmacy"]
APPS = ["Spotify", "Camera", "Maps", "Calculator", "Settings", "WhatsApp", "Instagram", "Gmail", "Calendar",
        "YouTube", "Notes", "Uber", "Slack", "Photos", "Clock", "Netflix", "Duolingo", "Strava"]
UNIT_PAIRS = [("miles", "kilometers"), ("kilometers", "miles"), ("kilograms", "pounds"), ("pounds", "kilograms"),
              ("cups", "milliliters"), ("feet", "meters"), ("meters", "feet"), ("inches", "centimeters"),
              ("fahrenheit", "celsius"), ("celsius", "fahrenheit"), ("ounces", "grams"), ("liters", "gallons"),
              ("gallons", "liters"), ("yards", "meters"), ("tablespoons", "teaspoons"), ("acres", "hectares")]
# Names people say -> the ISO code the tool wants (a documented derived value).
CURRENCY_NAMES = {"dollars": "USD", "US dollars": "USD", "euros": "EUR", "British pounds": "GBP",
                  "yen": "JPY", "Swiss francs": "CHF", "Canadian dollars": "CAD", "rupees": "INR",
                  "pesos": "MXN", "won": "KRW", "Australian dollars": "AUD", "yuan": "CNY", "reais": "BRL"}
CURRENCY_CODES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "INR", "MXN", "KRW", "AUD", "CNY", "BRL"]
STOCKS = ["AAPL", "TSLA", "MSFT", "NVDA", "AMZN", "GOOGL", "META", "NFLX", "SHOP", "SAP", "TSM"]
NEWS_TOPICS = ["technology", "sports", "politics", "science", "business", "climate", "football", "space",
               "AI", "health", "the economy", "local elections", "Formula 1"]
SEARCHES = ["best hiking trails near Denver", "how tall is Mount Everest", "who won the 2018 World Cup",
            "recipe for banana bread", "when does the Louvre open", "how to remove a red wine stain",
            "population of Canada", "symptoms of the flu", "cheap flights to Lisbon", "train times to Oxford",
            "reviews of the new Pixel phone", "what is a black hole", "history of the Eiffel Tower",
            "how to change a bike tire", "Lakers score last night", "how do vaccines work",
            "best pizza in Naples", "how long to boil an egg", "who wrote Pride and Prejudice",
            "is the Golden Gate Bridge open today"]
PHRASES = ["where is the train station", "thank you very much", "how much does this cost",
           "I would like a coffee", "good morning", "I'm allergic to peanuts", "the bill, please",
           "nice to meet you", "where is the bathroom", "can you help me", "I don't understand",
           "one ticket to the city center", "do you speak English"]
LANGUAGES = ["French", "Spanish", "German", "Italian", "Japanese", "Portuguese", "Korean", "Chinese",
             "Dutch", "Arabic", "Hindi", "Turkish", "Greek", "Swedish"]
EVENT_TITLES = ["dentist appointment", "team standup", "yoga class", "project review", "dinner with Mom",
                "haircut", "parent-teacher meeting", "flight to Boston", "book club", "doctor's appointment",
                "sprint planning", "birthday party", "coffee with Leo", "car service", "piano lesson",
                "quarterly review", "date night", "soccer practice", "call with the bank"]
EVENT_PLACES = ["Room 4B", "the cafe on Main Street", "City Hall", "Dr. Kim's office", "the community center",
                "Zoom", "the office", "Blue Bottle Coffee", "the library", "Café Olé", "the gym", "Pier 39"]
SUBJECTS = ["Q3 budget", "vacation photos", "meeting notes", "invoice 2041", "weekend plans", "project update",
            "the contract", "dinner on Friday", "lease renewal", "team offsite"]
BODIES = ["the report is attached", "can we move our call to 3pm", "thanks for your help yesterday",
          "please review the draft by Monday", "I'll be out of office next week", "the numbers look good",
          "let's discuss this tomorrow", "the slides are ready", "I signed the form"]
MAIL_SEARCHES = ["flight confirmation", "invoice", "receipt from Amazon", "password reset", "boarding pass",
                 "the lease", "tax documents", "order status", "meeting agenda"]
DOMAINS = ["gmail.com", "acme.io", "outlook.com", "lumenlabs.com", "proton.me", "example.org"]
MERCHANTS = ["Trader Joe's", "Blue Bottle Coffee", "Target", "Shell", "Whole Foods", "Walgreens", "IKEA",
             "Corner Bakery", "Joe's Pizza", "Apple Store", "Home Depot", "Uniqlo", "Café Olé", "Bäckerei Roth"]
RECEIPT_ITEMS = ["latte", "croissant", "sandwich", "salad", "notebook", "batteries", "t-shirt", "lamp",
                 "pizza slice", "orange juice", "bagel", "shampoo", "gasoline", "phone case", "cookies"]
COMPANIES = ["Acme Corp", "Lumen Labs", "Globex", "Northwind", "Initech", "Blue Harbor Bank", "Stark Design",
             "Vandelay Industries", "Bright Dental", "Kite Logistics"]
STREETS = ["221B Baker Street", "1600 Amphitheatre Parkway", "42 Elm Street", "350 Fifth Avenue",
           "77 Sunset Blvd", "8 Rue de Rivoli", "15 Harbour Road", "500 Oak Avenue", "9 Kings Road",
           "12 Via Roma", "3 Hauptstraße", "88 Queen Street"]
POSTCODES = ["94103", "10001", "SW1A 1AA", "75001", "60614", "02139", "M5V 2T6", "2000", "10115", "98101"]
COUNTRIES = ["USA", "UK", "France", "Germany", "Canada", "Japan", "Australia", "Spain", "Italy"]
RIDE_TYPES = ["standard", "xl", "premium", "shared"]
LOCALES = ["en-US", "en-GB", "en-AU", "en-CA", "en-IN", "fr-FR", "de-DE", "es-ES"]
DEVICES = ["phone", "tablet", "watch", "speaker", "laptop", "car"]
NETWORKS = ["wifi", "cellular", "offline", "5G", "ethernet"]
ASSISTANT_NAMES = ["Needle", "Juno", "Pip", "Atlas", "Echo"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


# ---------------------------------------------------------------------------
# Tool catalogue. Each parameter is (name, schema, description); descriptions
# are kept short because the tools block is part of every prompt.
# ---------------------------------------------------------------------------
def _s(t, **kw):
    d = {"type": t}
    d.update(kw)
    return d


def tool(name, domain, desc, params, required):
    return {"name": name, "domain": domain, "description": desc, "params": params, "required": required}


ONOFF = "true to turn on, false to turn off"
# Clock times are local HH:MM. JSON Schema's format "time" is RFC 3339
# full-time (seconds and a UTC offset, "07:30:00Z"), wrong for an alarm clock,
# so times are declared with a pattern instead; dates use format "date".
CLOCK = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}
TOOLS = [
    # home
    tool("set_lights", "home", "Turn a room's lights on or off, or set brightness or colour",
         [("room", _s("string"), "Room name"), ("on", _s("boolean"), ONOFF),
          ("brightness", _s("integer", minimum=1, maximum=100), "Percent"),
          ("color", _s("string", enum=COLORS), "Light colour")], ["room", "on"]),
    tool("set_thermostat", "home", "Set the thermostat temperature or mode",
         [("temperature", _s("number"), "Target temperature"),
          ("unit", _s("string", enum=["celsius", "fahrenheit"]), "Temperature unit"),
          ("mode", _s("string", enum=["heat", "cool", "auto", "off"]), "HVAC mode")], ["temperature"]),
    tool("lock_door", "home", "Lock or unlock a door",
         [("door", _s("string"), "Which door"), ("locked", _s("boolean"), "true to lock, false to unlock")],
         ["door", "locked"]),
    tool("start_vacuum", "home", "Start the robot vacuum",
         [("rooms", _s("array", items=_s("string")), "Rooms to clean; all if omitted")], []),
    tool("set_fan", "home", "Set a room fan's speed",
         [("room", _s("string"), "Room name"), ("speed", _s("string", enum=["off", "low", "medium", "high"]), "Fan speed")],
         ["room", "speed"]),
    # time
    tool("set_timer", "time", "Start a countdown timer",
         [("hours", _s("integer", minimum=0), "Hours"), ("minutes", _s("integer", minimum=0), "Minutes"),
          ("seconds", _s("integer", minimum=0), "Seconds"), ("label", _s("string"), "Timer name")], []),
    tool("set_alarm", "time", "Set an alarm",
         [("time", CLOCK, "24-hour"), ("label", _s("string"), "Alarm name"),
          ("days", _s("array", items=_s("string", enum=WEEKDAYS)), "Repeat days")], ["time"]),
    tool("cancel_alarm", "time", "Cancel an alarm", [("time", CLOCK, "24-hour")],
         ["time"]),
    tool("stopwatch", "time", "Control the stopwatch",
         [("action", _s("string", enum=["start", "stop", "reset"]), "What to do")], ["action"]),
    # calendar
    tool("create_event", "calendar", "Add a calendar event",
         [("title", _s("string"), "Event title"), ("date", _s("string", format="date"), "YYYY-MM-DD"),
          ("time", CLOCK, "Start time"),
          ("duration_minutes", _s("integer", minimum=1), "Length in minutes"),
          ("location", _s("string"), "Where"),
          ("attendees", _s("array", items=_s("string")), "People invited")], ["title", "date"]),
    tool("list_events", "calendar", "List calendar events",
         [("date", _s("string", format="date"), "YYYY-MM-DD; today if omitted")], []),
    tool("cancel_event", "calendar", "Cancel a calendar event",
         [("title", _s("string"), "Event title"), ("date", _s("string", format="date"), "YYYY-MM-DD")], ["title"]),
    # communication
    tool("send_message", "comms", "Send a text message",
         [("recipient", _s("string"), "Contact name"), ("text", _s("string"), "Message body")],
         ["recipient", "text"]),
    tool("make_call", "comms", "Call a contact",
         [("contact", _s("string"), "Contact name"), ("video", _s("boolean"), "Video call")], ["contact"]),
    tool("read_messages", "comms", "Read recent messages",
         [("contact", _s("string"), "Only from this contact"), ("unread_only", _s("boolean"), "Only unread")], []),
    tool("send_email", "comms", "Send an email",
         [("to", _s("string"), "Recipient name or address"), ("subject", _s("string"), "Subject line"),
          ("body", _s("string"), "Email text")], ["to", "body"]),
    tool("search_email", "comms", "Search the mailbox",
         [("query", _s("string"), "Search words"), ("sender", _s("string"), "From this sender")], ["query"]),
    # weather
    tool("get_weather", "info", "Get the weather forecast",
         [("location", _s("string"), "City; current location if omitted"),
          ("date", _s("string", format="date"), "YYYY-MM-DD; today if omitted"),
          ("unit", _s("string", enum=["celsius", "fahrenheit"]), "Temperature unit")], []),
    # media
    tool("play_music", "media", "Play music",
         [("song", _s("string"), "Song title"), ("artist", _s("string"), "Artist"),
          ("playlist", _s("string"), "Playlist name"), ("shuffle", _s("boolean"), "Shuffle")], []),
    tool("media_control", "media", "Pause, resume or skip what is playing",
         [("action", _s("string", enum=["pause", "resume", "next", "previous", "stop"]), "Command")], ["action"]),
    tool("play_podcast", "media", "Play a podcast",
         [("show", _s("string"), "Podcast name"), ("latest", _s("boolean"), "Newest episode")], ["show"]),
    tool("play_radio", "media", "Play a radio station", [("station", _s("string"), "Station name")], ["station"]),
    # navigation
    tool("get_directions", "nav", "Get directions to a place",
         [("destination", _s("string"), "Where to"), ("origin", _s("string"), "Start; current location if omitted"),
          ("mode", _s("string", enum=MODES), "Travel mode")], ["destination"]),
    tool("find_places", "nav", "Find places nearby",
         [("query", _s("string"), "What to look for"), ("near", _s("string"), "Area; current location if omitted")],
         ["query"]),
    tool("share_location", "nav", "Share my location with a contact",
         [("contact", _s("string"), "Contact name"), ("minutes", _s("integer", minimum=1), "For how long")],
         ["contact"]),
    tool("book_ride", "nav", "Book a taxi ride",
         [("destination", _s("string"), "Where to"), ("ride_type", _s("string", enum=RIDE_TYPES), "Car class")],
         ["destination"]),
    # notes
    tool("create_note", "notes", "Save a note",
         [("content", _s("string"), "Note text"), ("title", _s("string"), "Note title")], ["content"]),
    tool("create_reminder", "notes", "Create a reminder",
         [("text", _s("string"), "What to remember"), ("date", _s("string", format="date"), "YYYY-MM-DD"),
          ("time", CLOCK, "HH:MM")], ["text"]),
    tool("search_notes", "notes", "Search my notes", [("query", _s("string"), "Search words")], ["query"]),
    tool("add_to_list", "notes", "Add items to a shopping list",
         [("items", _s("array", items=_s("string"), minItems=1), "Items"),
          ("list", _s("string"), "List name; groceries if omitted")], ["items"]),
    tool("remove_from_list", "notes", "Remove an item from a shopping list",
         [("item", _s("string"), "Item"), ("list", _s("string"), "List name")], ["item"]),
    # device settings
    tool("set_wifi", "device", "Turn wifi on or off", [("enabled", _s("boolean"), ONOFF)], ["enabled"]),
    tool("set_bluetooth", "device", "Turn bluetooth on or off", [("enabled", _s("boolean"), ONOFF)], ["enabled"]),
    tool("set_volume", "device", "Set the device volume",
         [("level", _s("integer", minimum=0, maximum=100), "Percent")], ["level"]),
    tool("set_brightness", "device", "Set the screen brightness",
         [("level", _s("integer", minimum=0, maximum=100), "Percent")], ["level"]),
    tool("set_dnd", "device", "Turn do-not-disturb on or off",
         [("enabled", _s("boolean"), ONOFF), ("until", CLOCK, "End time")], ["enabled"]),
    tool("set_airplane_mode", "device", "Turn airplane mode on or off", [("enabled", _s("boolean"), ONOFF)],
         ["enabled"]),
    tool("set_flashlight", "device", "Turn the flashlight on or off", [("on", _s("boolean"), ONOFF)], ["on"]),
    tool("open_app", "device", "Open an app", [("app", _s("string"), "App name")], ["app"]),
    tool("take_photo", "device", "Take a photo",
         [("camera", _s("string", enum=["front", "back"]), "Which camera"),
          ("delay_seconds", _s("integer", minimum=1), "Self-timer")], []),
    # conversion and information
    tool("convert_units", "info", "Convert between units",
         [("value", _s("number"), "Amount"), ("from_unit", _s("string"), "Unit to convert from"),
          ("to_unit", _s("string"), "Unit to convert to")], ["value", "from_unit", "to_unit"]),
    tool("convert_currency", "info", "Convert money between currencies",
         [("amount", _s("number"), "Amount"), ("from_currency", _s("string", enum=CURRENCY_CODES), "ISO code"),
          ("to_currency", _s("string", enum=CURRENCY_CODES), "ISO code")], ["amount", "from_currency", "to_currency"]),
    tool("web_search", "info", "Search the web", [("query", _s("string"), "Search words")], ["query"]),
    tool("translate", "info", "Translate text",
         [("text", _s("string"), "Text to translate"), ("language", _s("string"), "Target language")],
         ["text", "language"]),
    tool("get_stock_price", "info", "Get a stock quote", [("symbol", _s("string"), "Ticker symbol")], ["symbol"]),
    tool("get_news", "info", "Get news headlines", [("topic", _s("string"), "Topic; top stories if omitted")], []),
    # extraction "record" tools: the arguments are fields found in a text
    tool("record_contact", "record", "Record a contact found in the text",
         [("name", _s("string"), "Full name"), ("phone", _s("string"), "Phone number"),
          ("email", _s("string"), "Email address"), ("company", _s("string"), "Employer"),
          ("address", _s("object", properties={"street": _s("string"), "city": _s("string")},
                         required=["street", "city"]), "Postal address")], ["name"]),
    tool("record_receipt", "record", "Record a purchase receipt found in the text",
         [("merchant", _s("string"), "Store name"), ("total", _s("number"), "Amount paid"),
          ("date", _s("string", format="date"), "YYYY-MM-DD"),
          ("items", _s("array", items=_s("object", properties={"name": _s("string"), "price": _s("number")},
                                         required=["name", "price"])), "Line items")], ["merchant", "total"]),
    tool("record_event", "record", "Record an event found in the text",
         [("title", _s("string"), "What"), ("date", _s("string", format="date"), "YYYY-MM-DD"),
          ("time", CLOCK, "HH:MM"), ("location", _s("string"), "Where")], ["title", "date"]),
    tool("record_address", "record", "Record a postal address found in the text",
         [("name", _s("string"), "Addressee"), ("street", _s("string"), "Street and number"),
          ("city", _s("string"), "City"), ("postal_code", _s("string"), "Postal code"),
          ("country", _s("string"), "Country")], ["street", "city"]),
]
TOOL_BY_NAME = {t["name"]: t for t in TOOLS}
# The demo tool set: models/tools.json, the default --tools of `needle run`.
# Five tools, so all of them are rendered without the retrieval head.
DEMO_TOOLS = ["set_lights", "set_thermostat", "set_alarm", "send_message", "get_weather"]


def demo_tools():
    """The demo set exactly as models/tools.json declares it (compact form:
    it is prefilled on every `needle run`). Rows that use the demo set use
    these very declarations, whatever --compact says, so the shipped file is
    in the training distribution verbatim."""
    return [tool_schema(TOOL_BY_NAME[n], True) for n in DEMO_TOOLS]


def tool_schema(t, compact):
    """The JSON declaration of a tool as it appears in a row. Compact drops the
    parameter descriptions (about half the characters of a tools block)."""
    props = {}
    for name, schema, desc in t["params"]:
        p = dict(schema)
        if not compact:
            p["description"] = desc
        props[name] = p
    params = {"type": "object", "properties": props}
    if t["required"]:
        params["required"] = list(t["required"])
    return {"name": t["name"], "description": t["description"], "parameters": params}


# ---------------------------------------------------------------------------
# Slot samplers: f(rng, ctx) -> (text inserted in the query, {arg: value}).
# ctx["today"] is a datetime.date when the row has a `date:` system fact.
# ---------------------------------------------------------------------------
def pick(pool, arg):
    return lambda rng, ctx: _same(rng.choice(pool), arg)


def _same(v, arg):
    return v, {arg: v}


def int_slot(arg, lo, hi, step=1, fmt="{}"):
    def f(rng, ctx):
        v = rng.randrange(lo, hi + 1, step)
        return fmt.format(v), {arg: v}
    return f


def person(rng):
    r = rng.random()
    if r < 0.55:
        return rng.choice(FIRST)
    if r < 0.85:
        return rng.choice(FIRST) + " " + rng.choice(LAST)
    return rng.choice(FAMILY)


def person_slot(arg):
    return lambda rng, ctx: _same(person(rng), arg)


def people_slot(arg):
    """Two or three names joined naturally -> an array argument."""
    def f(rng, ctx):
        names = rng.sample(FIRST, rng.choice([2, 2, 3]))
        text = ", ".join(names[:-1]) + " and " + names[-1]
        return text, {arg: names}
    return f


def items_slot(arg, pool, k=(1, 3)):
    def f(rng, ctx):
        items = rng.sample(pool, rng.randint(*k))
        text = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        return text, {arg: items}
    return f


def hhmm(h, m):
    return "%02d:%02d" % (h, m)


def time_slot(arg, plain_hours=False):
    """Clock times as people write them; the value is always 24-hour HH:MM.
    plain_hours: a bare '7' (no am/pm) for 5..11 means the morning, as for alarms."""
    def f(rng, ctx):
        h = rng.randrange(0, 24)
        m = rng.choice([0, 0, 0, 15, 30, 45, 5, 10, 20, 40, 50])
        r = rng.random()
        if plain_hours and r < 0.25:
            h = rng.randrange(5, 12)
            return (str(h) if m == 0 else "%d:%02d" % (h, m)), {arg: hhmm(h, m)}
        if r < 0.06:
            return "noon", {arg: "12:00"}
        if r < 0.55:
            h12 = h % 12 or 12
            ap = rng.choice(["am", " am", "AM", " a.m."]) if h < 12 else rng.choice(["pm", " pm", "PM", " p.m."])
            return (str(h12) if m == 0 else "%d:%02d" % (h12, m)) + ap, {arg: hhmm(h, m)}
        return hhmm(h, m) if rng.random() < 0.6 else "%d:%02d" % (h, m), {arg: hhmm(h, m)}
    return f


def explicit_date(rng):
    d = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randrange(0, 3 * 365))
    r = rng.random()
    if r < 0.35:
        return d.isoformat(), d
    if r < 0.75:
        return "%s %d, %d" % (MONTHS[d.month - 1], d.day, d.year), d
    return "%d %s %d" % (d.day, MONTHS[d.month - 1], d.year), d


def relative_date(rng, today):
    """A relative phrase and the date it means given today's date."""
    r = rng.random()
    if r < 0.2:
        return "today", today
    if r < 0.45:
        return "tomorrow", today + datetime.timedelta(days=1)
    if r < 0.55:
        return "the day after tomorrow", today + datetime.timedelta(days=2)
    if r < 0.75:  # the next such weekday, 1..6 days ahead (never today: that would be ambiguous)
        ahead = rng.randrange(1, 7)
        d = today + datetime.timedelta(days=ahead)
        return "on " + WEEKDAYS[d.weekday()], d
    if r < 0.85:
        n = rng.randrange(2, 11)
        return "in %d days" % n, today + datetime.timedelta(days=n)
    # "on March 20": this year, or next year when that day has passed
    ahead = rng.randrange(3, 300)
    d = today + datetime.timedelta(days=ahead)
    return "on %s %d" % (MONTHS[d.month - 1], d.day), d


def date_slot(arg, required):
    """Dates: relative phrases are resolved only when a date fact is present.
    Without one, a relative phrase leaves an optional date out; a required date
    is always written explicitly. The text includes its preposition."""
    def f(rng, ctx):
        today = ctx.get("today")
        if today is not None and rng.random() < 0.7:
            text, d = relative_date(rng, today)
            return text, {arg: d.isoformat()}
        if today is None and not required and rng.random() < 0.3:
            text, _ = relative_date(rng, datetime.date(2026, 1, 1))
            return text, {}
        text, d = explicit_date(rng)
        return ("on " + text if rng.random() < 0.8 else text), {arg: d.isoformat()}
    return f


def duration_slot(rng, ctx):
    r = rng.random()
    if r < 0.45:
        m = rng.choice([1, 2, 3, 5, 7, 8, 10, 12, 15, 20, 25, 30, 40, 45, 90])
        return "%d minute%s" % (m, "s" if m > 1 else ""), {"minutes": m}
    if r < 0.6:
        s = rng.choice([10, 20, 30, 45, 60, 90, 120])
        return "%d seconds" % s, {"seconds": s}
    if r < 0.75:
        h = rng.choice([1, 2, 3, 4])
        return "%d hour%s" % (h, "s" if h > 1 else ""), {"hours": h}
    if r < 0.9:
        h, m = rng.choice([1, 2]), rng.choice([10, 15, 20, 30, 45])
        return "%d hour%s and %d minutes" % (h, "s" if h > 1 else "", m), {"hours": h, "minutes": m}
    m, s = rng.choice([1, 2, 3, 4]), rng.choice([15, 30, 45])
    return "%d minutes %d seconds" % (m, s), {"minutes": m, "seconds": s}


def temp_slot(rng, ctx):
    if rng.random() < 0.5:
        v = rng.choice([16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 19.5, 20.5, 21.5, 22.5])
        unit = "celsius"
    else:
        v = rng.randrange(60, 81)
        unit = "fahrenheit"
    return _fmt_num(v), {"temperature": v, "_unit": unit}


def _fmt_num(v):
    return str(int(v)) if float(v).is_integer() else str(v)


def money(rng, lo, hi):
    return round(rng.randrange(lo * 100, hi * 100) / 100.0, 2)


def amount_slot(arg):
    def f(rng, ctx):
        v = rng.choice([5, 10, 20, 25, 50, 100, 120, 200, 250, 500, 1000, 1500, 75, 12.5, 99.99, 3.75])
        return _fmt_num(v), {arg: v}
    return f


def currency_slot(arg):
    def f(rng, ctx):
        if rng.random() < 0.3:
            code = rng.choice(CURRENCY_CODES)
            return code, {arg: code}
        name = rng.choice(sorted(CURRENCY_NAMES))
        return name, {arg: CURRENCY_NAMES[name]}
    return f


def unit_of_pair(index, arg):
    """Both units of a conversion come from one sensible pair, whichever slot
    the template names first picks it."""
    def f(rng, ctx):
        if "_pair" not in ctx:
            ctx["_pair"] = rng.choice(UNIT_PAIRS)
        return _same(ctx["_pair"][index], arg)
    return f


def phone(rng):
    r = rng.random()
    if r < 0.4:
        return "555-%04d" % rng.randrange(100, 10000)
    if r < 0.75:
        return "(%d) 555-%04d" % (rng.randrange(200, 999), rng.randrange(0, 10000))
    return "+44 20 7946 %04d" % rng.randrange(0, 10000)


def ascii_name(rng):
    while True:
        n = rng.choice(FIRST)
        if n.isascii():
            return n


def email_addr(rng):
    return "%s@%s" % (ascii_name(rng).lower() + rng.choice(["", ".", "_"]) + rng.choice(LAST[:6]).lower()
                      if rng.random() < 0.5 else ascii_name(rng).lower(), rng.choice(DOMAINS))


def with_location_fact(rng, ctx):
    """'What's the weather' with no place: the location fact fills it in."""
    loc = ctx.get("location")
    return "", ({"location": loc} if loc else {})


# Default slot samplers, shared by intents unless an intent overrides a name.
SLOTS = {
    "room": pick(ROOMS, "room"), "door": pick(DOORS, "door"), "color": pick(COLORS, "color"),
    "brightness": int_slot("brightness", 5, 100, 5), "level": int_slot("level", 0, 100, 5),
    "person": person_slot("recipient"), "msg": pick(MESSAGES, "text"), "city": pick(CITIES, "location"),
    "song": pick(SONGS, "song"), "artist": pick(ARTISTS, "artist"), "playlist": pick(PLAYLISTS, "playlist"),
    "podcast": pick(PODCASTS, "show"), "station": pick(STATIONS, "station"),
    "dest": pick(DESTINATIONS, "destination"), "mode": pick(MODES, "mode"),
    "kind": pick(PLACE_KINDS, "query"), "near": pick(NEAR, "near"),
    "note": pick(NOTES, "content"), "ntitle": pick(NOTE_TITLES, "title"), "todo": pick(REMINDERS, "text"),
    "items": items_slot("items", ITEMS), "list": pick(LISTS, "list"), "item": pick(ITEMS, "item"),
    "app": pick(APPS, "app"), "dur": duration_slot, "temp": temp_slot,
    "time": time_slot("time"), "atime": time_slot("time", plain_hours=True),
    "date": date_slot("date", required=False), "rdate": date_slot("date", required=True),
    "etitle": pick(EVENT_TITLES, "title"), "eplace": pick(EVENT_PLACES, "location"),
    "attendees": people_slot("attendees"), "mins": int_slot("duration_minutes", 15, 120, 15),
    "subject": pick(SUBJECTS, "subject"), "body": pick(BODIES, "body"), "msearch": pick(MAIL_SEARCHES, "query"),
    "search": pick(SEARCHES, "query"), "phrase": pick(PHRASES, "text"), "lang": pick(LANGUAGES, "language"),
    "stock": pick(STOCKS, "symbol"), "topic": pick(NEWS_TOPICS, "topic"), "amount": amount_slot("amount"),
    "value": amount_slot("value"),
    "cfrom": currency_slot("from_currency"), "cto": currency_slot("to_currency"),
    "here": with_location_fact,
}


class Intent:
    """Phrasings of one request kind for one tool.
    cmd: imperative clauses (lower case, no final punctuation) - they can be
         prefixed ("please ...") and joined into two-call requests.
    ask: complete utterances (questions, statements) used as they are.
    fixed: arguments implied by every phrasing (e.g. on=false for 'turn off').
    slots: per-intent slot samplers overriding SLOTS.
    post: optional f(args, slot_values) -> args, to derive e.g. a unit."""

    def __init__(self, name, tool_name, cmd=(), ask=(), fixed=None, slots=None, post=None, why=None):
        self.name, self.tool = name, tool_name
        self.templates = [(t, True) for t in cmd] + [(t, False) for t in ask]
        self.fixed = fixed or {}
        self.slots = dict(SLOTS, **(slots or {}))
        self.post = post
        desc = TOOL_BY_NAME[tool_name]["description"]
        self.why = why or "Needs %s: %s." % (tool_name, desc[0].lower() + desc[1:])


def _thermo_post(args, raw):
    """The temperature unit is an argument only when the text says it."""
    unit = args.pop("_unit", None)
    if unit and "tunit" in raw:
        args["unit"] = unit
    return args


I = Intent
INTENTS = [
    # --- lights
    I("lights_off", "set_lights", fixed={"on": False}, cmd=[
        "turn off the {room} lights", "switch off the lights in the {room}", "turn the {room} lights off",
        "kill the lights in the {room}", "shut off the {room} lights", "lights off in the {room}",
        "turn off the light in the {room}", "switch the {room} lights off"], ask=[
        "{room} lights off", "It's too bright in the {room}, turn the lights off.",
        "Could the {room} lights go off?", "I'm leaving the {room}, lights off please."]),
    I("lights_on", "set_lights", fixed={"on": True}, cmd=[
        "turn on the {room} lights", "switch on the lights in the {room}", "turn the {room} lights on",
        "lights on in the {room}", "put the {room} lights on", "turn on the light in the {room}"], ask=[
        "It's dark in the {room}, turn the lights on.", "{room} lights on", "Could you light up the {room}?"]),
    I("lights_dim", "set_lights", fixed={"on": True}, cmd=[
        "set the {room} lights to {brightness}%", "dim the {room} lights to {brightness} percent",
        "turn the {room} lights on at {brightness}%", "brighten the {room} lights to {brightness}%",
        "put the lights in the {room} at {brightness} percent"], ask=[
        "{room} lights at {brightness}%", "{brightness}% in the {room}, please."]),
    I("lights_color", "set_lights", fixed={"on": True}, cmd=[
        "make the {room} lights {color}", "turn the {room} lights {color}", "set the {room} lights to {color}",
        "change the {room} light colour to {color}", "set the lights in the {room} to {color} at {brightness}%",
        "switch the {room} lights to {color}"], ask=[
        "I want {color} light in the {room}.", "Can the {room} lights be {color}?"]),
    I("lights_off_two", "set_lights", cmd=[
        "turn off the {room} and {room2} lights", "switch off the lights in the {room} and the {room2}",
        "turn the lights off in the {room} and the {room2}", "kill the {room} and {room2} lights",
        "shut off the lights in the {room} and {room2}"], ask=[
        "Lights off in the {room} and the {room2}, please.", "{room} and {room2} lights off"],
        slots={"room2": pick(ROOMS, "_room2")}),
    # --- thermostat, doors, vacuum, fan
    I("thermo_set", "set_thermostat", post=_thermo_post, cmd=[
        "set the thermostat to {temp}", "set the temperature to {temp} degrees", "make it {temp} degrees in here",
        "set the heat to {temp}", "change the thermostat to {temp} degrees {tunit}",
        "set the thermostat to {temp} {tunit}", "set the AC to {mode} at {temp} degrees"], ask=[
        "I'm cold, set the thermostat to {temp}.", "Thermostat {temp} degrees {tunit}",
        "Can you put the heating on {temp}?"],
        slots={"mode": pick(["cool", "heat", "auto"], "mode")}),
    I("thermo_mode", "set_thermostat", cmd=[
        "switch the thermostat to {mode} mode at {temp}", "put the thermostat on {mode} at {temp} degrees",
        "set the HVAC to {mode} and {temp} degrees", "change the thermostat to {mode}, {temp} degrees",
        "put the heating system on {mode} at {temp}"], ask=["Thermostat: {mode}, {temp} degrees.",
                                                           "Can you set the thermostat to {mode} at {temp}?"],
        post=_thermo_post, slots={"mode": pick(["heat", "cool", "auto"], "mode")}),
    I("door_lock", "lock_door", fixed={"locked": True}, cmd=[
        "lock the {door}", "make sure the {door} is locked", "lock up the {door}", "please lock the {door} now",
        "secure the {door}"], ask=["Did I lock the {door}? Lock it.", "{door}: lock it", "Is the {door} locked? Lock it please."]),
    I("door_unlock", "lock_door", fixed={"locked": False}, cmd=[
        "unlock the {door}", "open the lock on the {door}", "unlock the {door} for the delivery",
        "let me in through the {door}", "unlock {door}"], ask=["I'm home, unlock the {door}.", "{door}: unlock"]),
    I("vacuum", "start_vacuum", cmd=[
        "start the vacuum", "run the robot vacuum", "vacuum the house", "start cleaning",
        "vacuum the {rooms}", "clean the {rooms} with the robot", "send the vacuum to the {rooms}"], ask=[
        "The floors are dirty, start the vacuum.", "Robot, clean the {rooms}."],
        slots={"rooms": items_slot("rooms", ROOMS, (1, 3))}),
    I("fan", "set_fan", cmd=[
        "set the {room} fan to {speed}", "turn the fan in the {room} to {speed}", "put the {room} fan on {speed}",
        "change the {room} fan speed to {speed}", "{room} fan on {speed}"], ask=[
        "It's hot in the {room}, fan on {speed}.", "The {room} fan should be on {speed}."],
        slots={"speed": pick(["low", "medium", "high", "off"], "speed")}),
    # --- timers and alarms
    I("timer", "set_timer", cmd=[
        "set a timer for {dur}", "start a {dur} timer", "time {dur}", "count down {dur}",
        "set a {label} timer for {dur}", "start a timer for {dur} called {label}", "timer {dur}"], ask=[
        "{dur} timer please", "Remind me in {dur}, set a timer.", "Can you time {dur} for the {label}?"],
        slots={"label": pick(["pasta", "eggs", "laundry", "tea", "pizza", "workout", "nap", "parking"], "label")}),
    I("alarm", "set_alarm", cmd=[
        "set an alarm for {atime}", "wake me up at {atime}", "set an alarm at {atime}", "alarm for {atime}",
        "set a {label} alarm for {atime}", "wake me at {atime} every {day}", "set an alarm for {atime} on {day}s",
        "set an alarm for {atime} called {label}"], ask=[
        "I need to get up at {atime}.", "Alarm {atime} please", "Please get me up at {atime}."],
        slots={"label": pick(["gym", "work", "meds", "flight", "school run"], "label"),
               "day": lambda rng, ctx: (lambda d: (d, {"days": [d]}))(rng.choice(WEEKDAYS))}),
    I("alarm_cancel", "cancel_alarm", cmd=[
        "cancel my {time} alarm", "delete the alarm for {time}", "turn off the {time} alarm",
        "remove the alarm at {time}", "cancel the alarm set for {time}"], ask=[
        "I don't need the {time} alarm anymore.", "No alarm at {time} tomorrow, cancel it."]),
    I("stopwatch_start", "stopwatch", fixed={"action": "start"}, cmd=[
        "start the stopwatch", "start a stopwatch", "begin timing", "stopwatch go"], ask=[
        "Start timing me now.", "Stopwatch, start."]),
    I("stopwatch_stop", "stopwatch", fixed={"action": "stop"}, cmd=[
        "stop the stopwatch", "pause the stopwatch", "stop timing"], ask=["Stopwatch stop!", "Done, stop the clock."]),
    I("stopwatch_reset", "stopwatch", fixed={"action": "reset"}, cmd=[
        "reset the stopwatch", "clear the stopwatch", "zero the stopwatch", "reset the timer on the stopwatch"],
      ask=["Stopwatch reset.", "Put the stopwatch back to zero."]),
    # --- calendar
    I("event_add", "create_event", cmd=[
        "add {etitle} to my calendar {rdate}", "schedule {etitle} {rdate} at {time}",
        "put {etitle} on my calendar {rdate} at {time}", "create an event called {etitle} {rdate}",
        "book {etitle} {rdate} at {time} for {mins} minutes", "schedule {etitle} {rdate} at {eplace}",
        "add {etitle} {rdate} at {time} with {attendees}", "schedule a meeting called {etitle} {rdate} with {attendees}"],
        ask=["I have {etitle} {rdate} at {time}, put it in my calendar.",
             "New event: {etitle}, {rdate}, at {eplace}.", "Can you add {etitle} {rdate} at {time} at {eplace}?"]),
    I("event_list", "list_events", cmd=[
        "show my calendar {date}", "list my events {date}", "show my schedule", "check my calendar",
        "read me my appointments {date}"], ask=[
        "What's on my calendar {date}?", "Am I free {date}?", "What do I have on {date}?", "Do I have meetings {date}?"]),
    I("event_cancel", "cancel_event", cmd=[
        "cancel {etitle}", "cancel my {etitle} {date}", "remove {etitle} from my calendar",
        "delete the {etitle} event {date}", "call off {etitle}"], ask=["I can't make {etitle} {date}, cancel it."]),
    # --- messages, calls, email
    I("message", "send_message", cmd=[
        "text {person} {msg}", "send {person} a message saying {msg}", "tell {person} {msg}",
        "message {person}: {msg}", "send a text to {person} that says \"{msg}\"", "let {person} know {msg}",
        "text {person} \"{msg}\"", "write to {person}: {msg}"], ask=[
        "Send a message to {person}: {msg}", "Can you text {person} that {msg}?"]),
    I("call", "make_call", cmd=[
        "call {person}", "phone {person}", "ring {person}", "give {person} a call", "dial {person}",
        "call {person} on speaker"], ask=["I need to talk to {person}, call them.", "Get {person} on the phone."],
        slots={"person": person_slot("contact")}),
    I("video_call", "make_call", fixed={"video": True}, cmd=[
        "video call {person}", "facetime {person}", "start a video call with {person}",
        "call {person} on video"], ask=["I want to see {person} on video."],
        slots={"person": person_slot("contact")}),
    I("read_msgs", "read_messages", cmd=[
        "read my messages", "read my new messages from {person}", "read {person}'s messages",
        "check my texts", "show messages from {person}"], ask=[
        "Did {person} text me?", "What did {person} say?", "Any new messages?"],
        slots={"person": person_slot("contact")}),
    I("read_unread", "read_messages", fixed={"unread_only": True}, cmd=[
        "read my unread messages", "read my unread texts from {person}", "show unread messages",
        "check unread messages from {person}", "read unread"], ask=["Do I have unread texts?"],
        slots={"person": person_slot("contact")}),
    I("email_send", "send_email", cmd=[
        "email {to} saying {body}", "send an email to {to}: {body}", "write an email to {to} that {body}",
        "email {to} with subject \"{subject}\" saying {body}", "send {to} an email about {subject}: {body}",
        "send an email to {to} with the subject {subject} and say {body}"], ask=[
        "Email {to}: {body}", "Can you email {to} that {body}?"],
        slots={"to": lambda rng, ctx: _same(email_addr(rng) if rng.random() < 0.4 else person(rng), "to")}),
    I("email_search", "search_email", cmd=[
        "search my email for {msearch}", "find the email about {msearch}", "look for {msearch} in my inbox",
        "find emails from {sender} about {msearch}", "search my mail for {msearch} from {sender}"], ask=[
        "Where's that email with the {msearch}?", "Did {sender} send me the {msearch}?"],
        slots={"sender": person_slot("sender")}),
    # --- weather
    I("weather_city", "get_weather", cmd=[
        "check the weather in {city}", "get the forecast for {city} {date}", "show me the weather in {city}",
        "look up the weather for {city} {date}", "get the weather in {city} in {unit}"], ask=[
        "What's the weather in {city}?", "Will it rain in {city} {date}?", "How hot is it in {city}?",
        "Is it cold in {city} {date}?", "What's the forecast for {city} {date} in {unit}?",
        "Weather in {city} {date}"],
        slots={"unit": pick(["celsius", "fahrenheit"], "unit")}),
    I("weather_here", "get_weather", cmd=["check the weather{here}", "get the forecast{here}",
                                          "show the forecast{here} {date}"], ask=[
        "What's the weather like{here}?", "Do I need an umbrella {date}?{here}", "Will it rain {date}?{here}",
        "How warm is it outside?{here}", "Is it going to snow {date}?{here}"]),
    # --- media
    I("music_song", "play_music", cmd=[
        "play {song}", "play {song} by {artist}", "put on {song}", "play the song {song}",
        "play some {artist}", "play music by {artist}", "shuffle songs by {artist}"], ask=[
        "Put {song} on, please.", "Play {artist}, please.", "I want to hear {song} by {artist}."]),
    I("music_playlist", "play_music", cmd=[
        "play my {playlist} playlist", "put on the {playlist} playlist", "shuffle my {playlist} playlist",
        "start the {playlist} playlist", "play {playlist} on shuffle"], ask=["My {playlist} playlist, please."]),
    I("media_pause", "media_control", fixed={"action": "pause"}, cmd=[
        "pause the music", "pause", "pause playback", "hold the music", "pause the song"], ask=["Pause it."]),
    I("media_next", "media_control", fixed={"action": "next"}, cmd=[
        "skip this song", "next track", "play the next song", "skip", "go to the next song"], ask=["I hate this song, skip it."]),
    I("media_prev", "media_control", fixed={"action": "previous"}, cmd=[
        "go back a song", "play the previous track", "previous song", "play the last song again"], ask=["Go back one track."]),
    I("media_resume", "media_control", fixed={"action": "resume"}, cmd=[
        "resume the music", "resume playback", "keep playing", "continue the song", "unpause"], ask=["Resume please."]),
    I("media_stop", "media_control", fixed={"action": "stop"}, cmd=[
        "stop the music", "stop playing", "stop playback", "turn the music off"], ask=["Enough music, stop it."]),
    I("podcast", "play_podcast", cmd=[
        "play {podcast}", "play the {podcast} podcast", "put on {podcast}", "resume {podcast}",
        "play the latest episode of {podcast}", "play the newest {podcast} episode"], ask=[
        "Can you play the latest {podcast}?", "I want to listen to {podcast}."]),
    I("radio", "play_radio", cmd=[
        "play {station}", "tune in to {station}", "put on {station} radio", "play the radio station {station}",
        "switch to {station}"], ask=["Can you play {station} on the radio?", "Radio: {station}"]),
    # --- navigation
    I("directions", "get_directions", cmd=[
        "navigate to {dest}", "take me to {dest}", "get directions to {dest}", "get {mode} directions to {dest}",
        "directions to {dest} from {origin}", "show me the {mode} route to {dest}",
        "navigate from {origin} to {dest}", "find the fastest way to {dest}"], ask=[
        "How do I get to {dest}?", "What's the best way to {dest} by {mode}?", "How do I get to {dest} by {mode}?"],
        slots={"origin": pick(NEAR, "origin")}),
    I("places", "find_places", cmd=[
        "find {kind} near {near}", "show me {kind} nearby", "look for {kind} around {near}", "find {kind}",
        "search for {kind} close to {near}"], ask=["Are there any {kind} near {near}?", "Where can I find {kind} near me?"]),
    I("share_loc", "share_location", cmd=[
        "share my location with {person}", "send my location to {person}", "share my location with {person} for {mins} minutes",
        "let {person} see where I am", "share where I am with {person} for the next {mins} minutes"], ask=[
        "Can {person} see my location for {mins} minutes?"],
        slots={"person": person_slot("contact"), "mins": int_slot("minutes", 15, 240, 15)}),
    I("ride", "book_ride", cmd=[
        "book a ride to {dest}", "get me a taxi to {dest}", "order a {ride} ride to {dest}",
        "call a car to {dest}", "book a {ride} ride to {dest}", "get me a ride to {dest}, {ride} class"], ask=[
        "I need a ride to {dest}.", "Can you get me a cab to {dest}?"],
        slots={"ride": pick(RIDE_TYPES, "ride_type")}),
    # --- notes, reminders, lists
    I("note", "create_note", cmd=[
        "take a note: {note}", "note that {note}", "make a note saying {note}", "save a note: {note}",
        "write down {note}", "add a note called {ntitle}: {note}", "create a note titled {ntitle} that says {note}"],
        ask=["Note to self: {note}", "Please remember this as a note: {note}"]),
    I("reminder", "create_reminder", cmd=[
        "remind me to {todo}", "remind me to {todo} {date}", "remind me to {todo} at {time}",
        "remind me {date} at {time} to {todo}", "set a reminder to {todo}", "create a reminder to {todo} {date} at {time}",
        "add a reminder: {todo}", "remind me at {time} to {todo}"], ask=[
        "Don't let me forget to {todo}.", "I need to {todo} {date}, remind me."]),
    I("note_search", "search_notes", cmd=[
        "search my notes for {q}", "find my note about {q}", "look up {q} in my notes", "find notes about {q}",
        "open the note about {q}"], ask=["What did I write about {q}?", "Do I have a note about {q}?"],
        slots={"q": pick(["the wifi password", "gift ideas", "the gate code", "passport", "recipes", "the plumber",
                          "parking", "book club"], "query")}),
    I("list_add", "add_to_list", cmd=[
        "add {items} to my shopping list", "put {items} on the list", "add {items} to the {list} list",
        "put {items} on my {list} list", "add {items}"], ask=["We need {items}.", "I need to buy {items}.",
        "We're out of {items}, add it to the list.", "Shopping list: {items}", "Add {items} to {list}, please."]),
    I("list_remove", "remove_from_list", cmd=[
        "remove {item} from my shopping list", "take {item} off the list", "cross {item} off the {list} list",
        "delete {item} from the {list} list"], ask=["I already bought {item}, remove it.",
        "We don't need {item} anymore.", "Take {item} off my {list} list."]),
    # --- device settings
    I("wifi_on", "set_wifi", fixed={"enabled": True}, cmd=["turn on wifi", "enable wifi", "switch wifi on",
                                                          "connect to wifi", "wifi on"], ask=["Can you turn the wifi on?"]),
    I("wifi_off", "set_wifi", fixed={"enabled": False}, cmd=["turn off wifi", "disable wifi", "switch wifi off",
                                                            "wifi off"], ask=["Turn the wifi off, please."]),
    I("bt_on", "set_bluetooth", fixed={"enabled": True}, cmd=["turn on bluetooth", "enable bluetooth",
                                                             "switch bluetooth on", "bluetooth on"],
      ask=["I want to connect my headphones, turn on bluetooth."]),
    I("bt_off", "set_bluetooth", fixed={"enabled": False}, cmd=["turn off bluetooth", "disable bluetooth",
                                                               "switch off bluetooth", "bluetooth off"],
      ask=["Bluetooth off to save battery."]),
    I("volume", "set_volume", cmd=[
        "set the volume to {level}", "turn the volume to {level}%", "volume {level}", "change the volume to {level} percent",
        "put the volume at {level}"], ask=["Volume to {level}, please.", "Can you set the volume to {level}%?"]),
    I("mute", "set_volume", fixed={"level": 0}, cmd=["mute the phone", "mute", "mute the volume", "mute everything"],
      ask=["Mute the sound."]),
    I("brightness", "set_brightness", cmd=[
        "set the screen brightness to {level}%", "make the screen {level}% bright", "brightness {level}",
        "change the display brightness to {level}", "set brightness to {level} percent"], ask=[
        "The screen is too dim, brightness to {level}%.", "Screen brightness {level} please"]),
    I("dnd_on", "set_dnd", fixed={"enabled": True}, cmd=[
        "turn on do not disturb", "enable do-not-disturb", "turn on do not disturb until {time}",
        "silence notifications until {time}", "do not disturb until {time}", "don't disturb me"], ask=[
        "I'm in a meeting, turn on do not disturb.", "No notifications until {time}, please."],
        slots={"time": time_slot("until")}),
    I("dnd_off", "set_dnd", fixed={"enabled": False}, cmd=[
        "turn off do not disturb", "disable do-not-disturb", "end do not disturb", "do not disturb off"],
      ask=["I'm out of the meeting, turn off do not disturb."]),
    I("plane_on", "set_airplane_mode", fixed={"enabled": True}, cmd=[
        "turn on airplane mode", "enable airplane mode", "switch to airplane mode", "airplane mode on"],
      ask=["We're taking off, airplane mode please."]),
    I("plane_off", "set_airplane_mode", fixed={"enabled": False}, cmd=[
        "turn off airplane mode", "disable airplane mode", "airplane mode off", "switch off airplane mode"],
      ask=["I landed, turn airplane mode off.", "Get me out of airplane mode."]),
    I("torch_on", "set_flashlight", fixed={"on": True}, cmd=[
        "turn on the flashlight", "flashlight on", "turn the torch on", "switch on the flashlight"],
      ask=["I can't see anything, flashlight please."]),
    I("torch_off", "set_flashlight", fixed={"on": False}, cmd=[
        "turn off the flashlight", "flashlight off", "turn the torch off", "switch off the flashlight"], ask=["Torch off."]),
    I("open_app", "open_app", cmd=["open {app}", "launch {app}", "start {app}", "open the {app} app", "go to {app}"],
      ask=["Bring up {app}.", "I need {app}."]),
    I("photo", "take_photo", cmd=[
        "take a photo", "take a picture", "take a selfie", "snap a photo with the {cam} camera",
        "take a photo in {delay} seconds", "take a picture with the {cam} camera in {delay} seconds",
        "take a picture using the {cam} camera"], ask=["Say cheese! Take a photo.", "Photo with a {delay} second timer please."],
        slots={"cam": pick(["front", "back"], "camera"), "delay": int_slot("delay_seconds", 2, 10)}),
    # --- conversion and information
    I("convert", "convert_units", cmd=[
        "convert {value} {from} to {to}", "change {value} {from} into {to}", "convert {value} {from} into {to}",
        "tell me {value} {from} in {to}"], ask=["{value} {from} in {to}?", "How much is {value} {from} in {to}?",
                                                "How many {to} is {value} {from}?", "What is {value} {from} in {to}?"],
        slots={"from": unit_of_pair(0, "from_unit"), "to": unit_of_pair(1, "to_unit")}),
    I("currency", "convert_currency", cmd=[
        "convert {amount} {cfrom} to {cto}", "change {amount} {cfrom} into {cto}", "convert {amount} {cfrom} into {cto}",
        "exchange {amount} {cfrom} to {cto}"], ask=["What's {amount} {cfrom} in {cto}?", "{amount} {cfrom} to {cto}?",
                                                      "How much is {amount} {cfrom} in {cto}?"]),
    I("search", "web_search", cmd=["search for {search}", "look up {search}", "google {search}",
                                    "search the web for {search}", "find out {search}"], ask=[
        "Can you search {search}?", "Search: {search}"]),
    I("translate", "translate", cmd=[
        "translate \"{phrase}\" into {lang}", "translate {phrase} to {lang}",
        "say \"{phrase}\" in {lang}", "put \"{phrase}\" into {lang}"], ask=[
        "What's \"{phrase}\" in {lang}?", "How do I say {phrase} in {lang}?", "How do you say {phrase} in {lang}?"]),
    I("stock", "get_stock_price", cmd=["check the {stock} stock price", "get a quote for {stock}", "look up {stock}",
                                       "show me {stock} stock"], ask=["How is {stock} doing today?",
                                                                       "What's {stock} trading at?"]),
    I("news", "get_news", cmd=["read me the news", "get the latest {topic} news", "show me news about {topic}",
                               "give me the headlines", "read the {topic} headlines"], ask=["What's new in {topic}?",
        "Any news on {topic}?", "What's happening in the world?", "Tell me the latest {topic} headlines."]),
]


# --- extraction intents: the query is a text passage; the record tool's
# arguments are the fields found in it. Each generator returns
# (query, args, key_values) so the same split rule applies.
def _contact(rng, ctx):
    name = rng.choice(FIRST) + " " + rng.choice(LAST)
    fields = {"name": name}
    tel = phone(rng) if rng.random() < 0.7 else None
    mail = email_addr(rng) if rng.random() < 0.6 else None
    comp = rng.choice(COMPANIES) if rng.random() < 0.5 else None
    addr = (rng.choice(STREETS), rng.choice(CITIES)) if rng.random() < 0.25 else None
    tpl = rng.randrange(6)
    parts = []
    if tpl == 0:
        parts.append("Hi, I'm %s" % name + (" from %s" % comp if comp else "") + ".")
    elif tpl == 1:
        parts.append("New contact: %s" % name + (", %s" % comp if comp else ""))
    elif tpl == 2:
        parts.append("Met %s at the conference" % name + (", works at %s" % comp if comp else "") + ".")
    elif tpl == 3:
        parts.append("Save this contact - %s" % name + (" (%s)" % comp if comp else ""))
    elif tpl == 4:
        parts.append("Thanks for the call! %s" % name + (", %s" % comp if comp else ""))
    else:
        parts.append("Name: %s" % name + ("\nCompany: %s" % comp if comp else ""))
    if tel:
        parts.append(rng.choice(["Phone: %s", "call me at %s", "tel %s", "mobile %s"]) % tel)
    if mail:
        parts.append(rng.choice(["Email: %s", "email me at %s", "%s"]) % mail)
    if addr:
        parts.append(rng.choice(["Address: %s, %s", "lives at %s, %s", "office at %s, %s"]) % addr)
    sep = "\n" if tpl == 5 else rng.choice([". ", ", ", "; "])
    query = sep.join(p.rstrip(".") for p in parts[:-1]) + (sep if len(parts) > 1 else "") + parts[-1]
    if rng.random() < 0.3:
        query = rng.choice(["Extract the contact: ", "Save the contact from this: ", ""]) + query
    if tel:
        fields["phone"] = tel
    if mail:
        fields["email"] = mail
    if comp:
        fields["company"] = comp
    if addr:
        fields["address"] = {"street": addr[0], "city": addr[1]}
    return query, fields, ("contact%d" % tpl, name, tel, mail, comp, addr)


def _receipt(rng, ctx):
    merchant = rng.choice(MERCHANTS)
    items = [(n, money(rng, 1, 40)) for n in rng.sample(RECEIPT_ITEMS, rng.randint(1, 3))]
    total = round(sum(p for _, p in items), 2)
    with_items = rng.random() < 0.6
    date_text, d = explicit_date(rng) if rng.random() < 0.6 else (None, None)
    tpl = rng.randrange(4)
    lines = []
    if tpl == 0:
        lines = [merchant]
        if date_text:
            lines.append(date_text)
        if with_items:
            lines += ["%s %.2f" % (n, p) for n, p in items]
        lines.append("TOTAL %.2f" % total)
        query = "\n".join(lines)
    elif tpl == 1:
        query = "Paid %.2f at %s" % (total, merchant) + (" on %s" % date_text if date_text else "")
        if with_items:
            query += " for " + ", ".join("%s (%.2f)" % (n, p) for n, p in items)
        query += "."
    elif tpl == 2:
        query = "Receipt - %s" % merchant + (", %s" % date_text if date_text else "")
        if with_items:
            query += ": " + "; ".join("%s %.2f" % (n, p) for n, p in items)
        query += ". Total: %.2f" % total
    else:
        query = "Log this expense: %s, total %.2f" % (merchant, total) + (", date %s" % date_text if date_text else "")
        if with_items:
            query += ". Items: " + ", ".join("%s %.2f" % (n, p) for n, p in items)
    args = {"merchant": merchant, "total": total}
    if date_text:
        args["date"] = d.isoformat()
    if with_items:
        args["items"] = [{"name": n, "price": p} for n, p in items]
    return query, args, ("receipt%d" % tpl, merchant, tuple(items), date_text, with_items)


def _event(rng, ctx):
    title = rng.choice(EVENT_TITLES + ["the school play", "a wine tasting", "the farmers market",
                                       "a jazz concert", "the charity run"])
    date_text, d = explicit_date(rng)
    t_text, t_args = time_slot("time")(rng, ctx) if rng.random() < 0.7 else (None, {})
    place = rng.choice(EVENT_PLACES) if rng.random() < 0.5 else None
    tpl = rng.randrange(5)
    if tpl == 0:
        q = "Join us for %s on %s" % (title, date_text)
        q += (" at %s" % t_text if t_text else "") + (", at %s" % place if place else "") + "!"
    elif tpl == 1:
        q = "Reminder: %s is on %s" % (title, date_text) + (", starting %s" % t_text if t_text else "")
        q += (". Location: %s." % place if place else ".")
    elif tpl == 2:
        q = "Event: %s\nDate: %s" % (title, date_text) + ("\nTime: %s" % t_text if t_text else "")
        q += ("\nPlace: %s" % place if place else "")
    elif tpl == 3:
        q = "Hey! Don't forget %s, %s" % (title, date_text) + (" %s" % t_text if t_text else "")
        q += (" at %s" % place if place else "") + "."
    else:
        q = "Save the date: %s - %s" % (title, date_text) + (", %s" % t_text if t_text else "")
        q += (", %s" % place if place else "")
    args = {"title": title, "date": d.isoformat()}
    args.update(t_args)
    if place:
        args["location"] = place
    return q, args, ("event%d" % tpl, title, date_text, t_text, place)


def _address(rng, ctx):
    name = rng.choice(FIRST) + " " + rng.choice(LAST) if rng.random() < 0.6 else None
    street, city = rng.choice(STREETS), rng.choice(CITIES)
    pc = rng.choice(POSTCODES) if rng.random() < 0.6 else None
    country = rng.choice(COUNTRIES) if rng.random() < 0.4 else None
    tpl = rng.randrange(4)
    tail = ", ".join(x for x in [city + (" " + pc if pc else ""), country] if x)
    if tpl == 0:
        q = "\n".join(x for x in [name, street, tail] if x)
    elif tpl == 1:
        q = "Please ship it to %s%s, %s." % ((name + ", ") if name else "", street, tail)
    elif tpl == 2:
        q = "My new address is %s, %s" % (street, tail) + (" (%s)" % name if name else "")
    else:
        q = "Send the invoice to %s%s, %s" % (("%s at " % name) if name else "", street, tail)
    args = {}
    if name:
        args["name"] = name
    args.update(street=street, city=city)
    if pc:
        args["postal_code"] = pc
    if country:
        args["country"] = country
    return q, args, ("address%d" % tpl, name, street, city, pc, country)


RECORDS = {"record_contact": _contact, "record_receipt": _receipt, "record_event": _event,
           "record_address": _address}

# ---------------------------------------------------------------------------
# Off-topic requests. Unsupported asks are actions no tool here can do; they
# are never paired with web_search (which could arguably answer questions).
# ---------------------------------------------------------------------------
CHITCHAT = ["how are you?", "hello!", "good morning", "thanks, that's all", "you're awesome", "who made you?",
            "what's your name?", "tell me a joke", "I'm bored", "lol", "ok cool", "never mind", "goodnight!",
            "do you like music?", "are you a robot?", "I had a rough day", "what can you do?", "hmm",
            "that was funny", "see you later", "thank you so much!", "sorry, wrong button", "yes", "no thanks",
            "what do you think about cats?", "I love you", "you're not very smart", "testing, testing",
            "are you there?", "happy new year!", "can we just chat?", "what's up?", "nothing, forget it",
            "good job", "what day is it for you?", "ugh, Mondays"]
UNSUPPORTED = ["book a table for two at Nobu", "order a large pepperoni pizza", "write a poem about autumn",
               "buy 3 shares of Tesla", "post this on Instagram", "do my math homework", "book a flight to Rome",
               "transfer 200 dollars to Sam", "hack my neighbour's wifi", "make me a sandwich",
               "order more printer ink", "draw a picture of a cat", "summarise this book for me",
               "reserve a hotel in Lisbon for Friday", "pay my credit card bill", "walk the dog",
               "fix my car", "write my cover letter", "sing happy birthday", "cancel my Netflix subscription",
               "order flowers for Mom", "rent a car for the weekend", "tell me a bedtime story",
               "water the lawn", "check my bank balance", "renew my passport", "compose a song about rain",
               "track my package", "delete my social media accounts", "buy concert tickets for Saturday"]
OFFTOPIC_WHY = {"chat": ["This is small talk; no tool is needed.", "Nothing to do here, no call."],
                "unsupported": ["None of the tools can do this.", "No declared tool fits this request."],
                "missing": ["The needed tool is not available.", "No declared tool fits this request."]}
# Tools that could stand in for each other: a request whose tool is missing is
# only answered [] when none of its group is declared either.
OVERLAP = [{"play_music", "play_podcast", "play_radio"}, {"create_note", "create_reminder", "set_alarm"},
           {"search_notes", "search_email", "read_messages"}, {"get_directions", "book_ride", "find_places"},
           {"send_message", "send_email", "make_call"}, {"set_volume", "media_control"},
           {"record_event", "create_event"}, {"record_contact", "record_address"}, {"stopwatch", "set_timer"}]


def overlapping(name):
    group = {name}
    for g in OVERLAP:
        if name in g:
            group |= g
    return group


CONNECTORS = [" and ", ", then ", " and also ", ", and ", ". Also ", " then "]
PREFIXES = [("", ""), ("", ""), ("", ""), ("please ", ""), ("can you ", "?"), ("could you ", "?"), ("hey, ", ""),
            ("", " please"), ("", ", thanks"), ("I'd like you to ", ""), ("quick: ", ""), ("", ".")]
SLOT_RE = re.compile(r"\{(\w+)\}")


# ---------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------
def bucket(key, holdout):
    """The split a combination belongs to: a stable hash of its key."""
    h = int(hashlib.sha256(json.dumps(key, ensure_ascii=True).encode()).hexdigest()[:12], 16) / float(16 ** 12)
    if h < holdout:
        return "val"
    if h < 2 * holdout:
        return "test"
    return "train"


def order_args(tool_name, args):
    """Arguments in the schema's declaration order (what the constrained decoder emits)."""
    order = [p[0] for p in TOOL_BY_NAME[tool_name]["params"]]
    out = {k: args[k] for k in order if k in args}
    extra = set(args) - set(out)
    assert not extra, (tool_name, extra)
    return out


def fill(intent, tidx, rng, ctx):
    """One phrasing of an intent: (text, calls, key)."""
    tpl, is_cmd = intent.templates[tidx]
    args = dict(intent.fixed)
    lctx = dict(ctx)  # per-phrasing scratch space (e.g. a unit pair shared by two slots)
    raw = {}
    texts = []

    def sub(m):
        name = m.group(1)
        if name == "tunit":  # the thermostat's unit word: the one temp_slot picked
            return "{tunit}"
        text, a = intent.slots[name](rng, lctx)
        raw[name] = text
        args.update(a)
        texts.append(text)
        return text
    text = SLOT_RE.sub(sub, tpl)
    if "{tunit}" in text:
        unit = args.get("_unit", "celsius")
        text = text.replace("{tunit}", unit)
        raw["tunit"] = unit
        texts.append(unit)
    if "from_currency" in args and args["from_currency"] == args.get("to_currency"):
        return None
    if "room2" in raw:  # two rooms -> two calls of the same tool
        if raw["room2"] == raw["room"]:
            return None
        args.pop("_room2")
        calls = [("set_lights", {"room": raw["room"], "on": False}), ("set_lights", {"room": raw["room2"], "on": False})]
    else:
        if intent.post:
            args = intent.post(args, raw)
        args.pop("_unit", None)
        if intent.tool == "play_music" and ("shuffle" in tpl):
            args["shuffle"] = True
        if intent.tool == "play_podcast" and ("latest" in tpl or "newest" in tpl):
            args["latest"] = True
        calls = [(intent.tool, args)]
    calls = [{"name": n, "arguments": order_args(n, a)} for n, a in calls]
    text = re.sub(r"\s+([?.!,])", r"\1", text.replace("  ", " ")).strip()
    return text, calls, [intent.name, tidx] + texts, is_cmd


def _string_values(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _string_values(x)
    elif isinstance(v, list):
        for x in v:
            yield from _string_values(x)


def dress(text, is_cmd, rng, calls=()):
    """Add a polite prefix/suffix to an imperative clause, capitalise sometimes
    - but never the first letter of a copied value ('kitchen' stays 'kitchen',
    so every string argument is a verbatim substring of the query)."""
    if is_cmd:
        pre, suf = rng.choice(PREFIXES)
        text = pre + text + suf
    starts_value = any(v and text.startswith(v) for c in calls for v in _string_values(c["arguments"]))
    if rng.random() < 0.5 and text[:1].islower() and not starts_value:
        text = text[0].upper() + text[1:]
    return text


INTENTS_BY_TOOL = {}
for _it in INTENTS:
    INTENTS_BY_TOOL.setdefault(_it.tool, []).append(_it)
for _name in RECORDS:
    INTENTS_BY_TOOL[_name] = [_name]
PLAIN_TOOLS = [t["name"] for t in TOOLS]


def sample_in_split(split, rng, ctx, holdout, tool_name=None, cmd_only=False, tries=400):
    """Draw an on-topic request whose combination hashes into `split`.
    Returns (text, calls, key, is_cmd, tool, why) or None."""
    for _ in range(tries):
        name = tool_name or rng.choice(PLAIN_TOOLS)
        intent = rng.choice(INTENTS_BY_TOOL[name])
        if isinstance(intent, str):  # extraction record
            if cmd_only:
                continue
            q, args, kv = RECORDS[intent](rng, ctx)
            key = [intent] + list(kv)
            if bucket(key, holdout) != split:
                continue
            calls = [{"name": intent, "arguments": order_args(intent, args)}]
            return q, calls, key, False, intent, "The text holds a %s to record." % intent.split("_")[1]
        choices = [i for i, (_, c) in enumerate(intent.templates) if c or not cmd_only]
        if not choices:
            continue
        r = fill(intent, rng.choice(choices), rng, ctx)
        if r is None:
            continue
        text, calls, key, is_cmd = r
        if bucket(key, holdout) != split:
            continue
        return text, calls, key, is_cmd, intent.tool, intent.why
    return None


def system_facts(rng, want_date):
    """A `key: value; ...` system turn and the context it gives the sampler."""
    ctx, facts = {}, []
    keys = ["date", "locale", "device", "battery", "network", "location", "user", "assistant"]
    chosen = [k for k in keys if rng.random() < 0.45] if not want_date else \
        ["date"] + [k for k in keys[1:] if rng.random() < 0.4]
    for k in chosen:
        if k == "date":
            today = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randrange(0, 3 * 365))
            ctx["today"] = today
            v = today.isoformat()
            if rng.random() < 0.3:
                v += " (" + WEEKDAYS[today.weekday()] + ")"
        elif k == "locale":
            v = rng.choice(LOCALES)
        elif k == "device":
            v = rng.choice(DEVICES)
        elif k == "battery":
            v = "%d%%" % rng.randrange(3, 101)
        elif k == "network":
            v = rng.choice(NETWORKS)
        elif k == "location":
            v = rng.choice(CITIES)
            ctx["location"] = v
        elif k == "user":
            v = rng.choice(FIRST) + " " + rng.choice(LAST)
        else:
            v = rng.choice(ASSISTANT_NAMES)
        facts.append("%s: %s" % (k, v))
    return "; ".join(facts), ctx


def choose_tools(needed, rng, opts, exclude=()):
    """1..max_tools tool names: the needed ones plus distractors (half of them
    from the same domain, the hard case), in random order."""
    n_total = rng.randint(max(1, len(needed)), max(opts.max_tools, len(needed)))
    pool = [t for t in PLAIN_TOOLS if t not in needed and t not in exclude]
    same = [t for t in pool if TOOL_BY_NAME[t]["domain"] in {TOOL_BY_NAME[n]["domain"] for n in needed}]
    picked = list(dict.fromkeys(needed))
    while len(picked) < n_total:
        src = same if same and rng.random() < 0.5 else pool
        t = rng.choice(src)
        if t not in picked:
            picked.append(t)
    rng.shuffle(picked)
    return picked


def render(row):
    """The chat text of SPEC.md section 7 (prompt + target), for length stats."""
    dumps = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=True)
    prompt = ""
    if row.get("system"):
        prompt += "<|im_start|>system\n" + row["system"] + "<|im_end|>\n"
    prompt += "<|im_start|>user\n<tools>" + dumps(row["tools"]) + "</tools>\n" + row["query"] + \
        "<|im_end|>\n<|im_start|>assistant\n"
    target = "<think>" + row.get("reasoning", "") + "</think>\n<tool_call>" + dumps(row["answers"]) + \
        "</tool_call><|im_end|>"
    return prompt, target


def make_row(split, kind, rng, opts):
    """One row of the given kind and its metadata (the combination keys it
    uses), or None when this draw found nothing in the split (retry)."""
    want_system = rng.random() < opts.system_rate
    system, ctx = system_facts(rng, rng.random() < 0.6) if want_system else ("", {})
    why = None
    if kind == "offtopic":
        sub = rng.choice(["chat", "chat", "unsupported", "unsupported", "missing", "missing", "missing"])
        if sub == "missing":
            s = sample_in_split(split, rng, ctx, opts.holdout)
            if s is None:
                return None
            text, calls, key, is_cmd, needed_tool, _ = s
            text = dress(text, is_cmd, rng, calls)
            # the needed tool is absent; web_search is kept out since it could
            # plausibly stand in for many requests
            tools = choose_tools([], rng, opts, exclude=overlapping(needed_tool) | {"web_search"})
            keys = [key]
        else:
            pool = CHITCHAT if sub == "chat" else UNSUPPORTED
            for _ in range(400):
                text = rng.choice(pool)
                key = ["offtopic", text]
                if bucket(key, opts.holdout) == split:
                    break
            else:
                return None
            text = dress(text, sub == "unsupported", rng)
            tools = choose_tools([], rng, opts, exclude=("web_search",) if sub == "unsupported" else ())
            keys = [key]
        answers = []
        why = rng.choice(OFFTOPIC_WHY[sub])
    elif kind == "two":
        a = sample_in_split(split, rng, ctx, opts.holdout, cmd_only=True)
        b = sample_in_split(split, rng, ctx, opts.holdout, cmd_only=True)
        if a is None or b is None or a[4] == b[4]:
            return None
        text = dress(a[0] + rng.choice(CONNECTORS) + b[0], True, rng, a[1])
        answers = a[1] + b[1]
        tools = choose_tools([a[4], b[4]], rng, opts)
        keys = [a[2], b[2]]
        why = "Two requests: %s and %s." % (a[4], b[4])
    else:
        demo = rng.random() < opts.demo_rate
        s = sample_in_split(split, rng, ctx, opts.holdout, tool_name=rng.choice(DEMO_TOOLS) if demo else None)
        if s is None:
            return None
        text, answers, key, is_cmd, needed_tool, why = s
        text = dress(text, is_cmd, rng, answers)
        tools = list(DEMO_TOOLS) if demo else choose_tools([needed_tool], rng, opts)
        if demo and opts.max_tools < len(tools):
            tools = choose_tools([needed_tool], rng, opts)
        keys = [key]
    decls = demo_tools() if tools == DEMO_TOOLS else [tool_schema(TOOL_BY_NAME[t], opts.compact) for t in tools]
    row = {"query": text, "tools": decls, "answers": answers}
    if rng.random() < opts.reasoning_rate and why:
        row["reasoning"] = why
    if system:
        row["system"] = system
    # trim distractors while the rendered example is over the character cap
    needed = {c["name"] for c in answers}
    while opts.max_chars and sum(map(len, render(row))) > opts.max_chars:
        drop = [i for i, t in enumerate(row["tools"]) if t["name"] not in needed]
        if not drop or len(row["tools"]) == 1:
            break
        del row["tools"][rng.choice(drop)]
    return row, {"kind": kind, "keys": keys}


# Rows every training set carries: the README's example with the demo tools,
# so `needle run "turn off the kitchen lights"` is squarely in distribution.
ANCHORS = [("turn off the kitchen lights", [{"name": "set_lights", "arguments": {"room": "kitchen", "on": False}}]),
           ("Turn off the kitchen lights", [{"name": "set_lights", "arguments": {"room": "kitchen", "on": False}}]),
           ("turn on the kitchen lights", [{"name": "set_lights", "arguments": {"room": "kitchen", "on": True}}])]
ANCHOR_KEYS = [["lights_off", 0, "kitchen"], ["lights_on", 0, "kitchen"]]


def generate(split, n, opts):
    rng = random.Random("%d:%s" % (opts.seed, split))
    rows, metas = [], []
    if split == "train":
        for q, ans in ANCHORS:
            tools = demo_tools() if opts.max_tools >= len(DEMO_TOOLS) else \
                [tool_schema(TOOL_BY_NAME["set_lights"], opts.compact)]
            rows.append({"query": q, "tools": tools, "answers": ans})
            metas.append({"kind": "anchor", "keys": [ANCHOR_KEYS[0] if "off" in q else ANCHOR_KEYS[1]]})
    anchor_keys = {json.dumps(k) for k in ANCHOR_KEYS}
    # Kinds are dealt from a shuffled deck with exact counts and kept through
    # retries, so the off-topic and two-call rates hold exactly in every split.
    left = n - len(rows)
    n_off = int(round(left * opts.offtopic_rate))
    n_two = int(round(left * opts.two_call_rate))
    deck = ["offtopic"] * n_off + ["two"] * n_two + ["single"] * (left - n_off - n_two)
    rng.shuffle(deck)
    for kind in deck:
        for _ in range(1000):
            r = make_row(split, kind, rng, opts)
            if r is None:
                continue
            if split != "train" and any(json.dumps(k) in anchor_keys for k in r[1]["keys"]):
                continue  # anchors belong to train only
            rows.append(r[0])
            metas.append(r[1])
            break
        else:
            raise RuntimeError("no %s row found for split %s; raise --holdout" % (kind, split))
    return rows[:n], metas[:n]


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0
    i = min(len(sorted_vals) - 1, int(round(p / 100.0 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def length_stats(rows, sp=None):
    chars = sorted(sum(map(len, render(r))) for r in rows)
    out = {"rows": len(rows), "chars": {
        "min": chars[0] if chars else 0, "mean": round(sum(chars) / max(1, len(chars)), 1),
        "p50": percentile(chars, 50), "p90": percentile(chars, 90), "p95": percentile(chars, 95),
        "p99": percentile(chars, 99), "max": chars[-1] if chars else 0,
        "over_1600": sum(c > 1600 for c in chars), "over_2048": sum(c > 2048 for c in chars)},
        "offtopic_rate": round(sum(1 for r in rows if not r["answers"]) / max(1, len(rows)), 4),
        "two_call_rate": round(sum(1 for r in rows if len(r["answers"]) > 1) / max(1, len(rows)), 4),
        "with_system": sum(1 for r in rows if "system" in r), "with_reasoning": sum(1 for r in rows if "reasoning" in r)}
    if sp is not None:  # BOS + prompt + target + EOS, encoded separately as SPEC.md section 7 says
        toks = sorted(2 + sum(len(sp.encode(part)) for part in render(r)) for r in rows)
        out["tokens"] = {"mean": round(sum(toks) / max(1, len(toks)), 1), "p50": percentile(toks, 50),
                         "p90": percentile(toks, 90), "p99": percentile(toks, 99), "max": toks[-1] if toks else 0,
                         "over_256": sum(t > 256 for t in toks), "over_512": sum(t > 512 for t in toks)}
    return out


def write_jsonl(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="data", help="output directory (default data/)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--val", type=int, default=1000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--max-tools", type=int, default=5, help="tools per example, at most (1..5 typical)")
    ap.add_argument("--max-chars", type=int, default=0,
                    help="drop distractor tools while the rendered example is longer (0 = no cap)")
    ap.add_argument("--compact", action="store_true", help="leave parameter descriptions out of tool schemas")
    ap.add_argument("--offtopic-rate", type=float, default=0.125)
    ap.add_argument("--two-call-rate", type=float, default=0.08)
    ap.add_argument("--system-rate", type=float, default=0.35)
    ap.add_argument("--reasoning-rate", type=float, default=0.3)
    ap.add_argument("--demo-rate", type=float, default=0.1, help="rows using exactly the demo tool set")
    ap.add_argument("--holdout", type=float, default=0.1,
                    help="share of template-value combinations reserved for val, and as much for test")
    ap.add_argument("--meta", action="store_true", help="also write SPLIT.meta.jsonl (combination keys per row)")
    ap.add_argument("--write-demo-tools", metavar="PATH", help="write the demo tool set (models/tools.json) and exit")
    ap.add_argument("--write-all-tools", metavar="PATH", help="write the whole tool catalogue and exit")
    ap.add_argument("--spm", metavar="MODEL", help="also count tokens with this SentencePiece model (needs sentencepiece)")
    opts = ap.parse_args(argv)
    if opts.max_tools < 1:
        ap.error("--max-tools must be at least 1")
    if not 0 < opts.holdout < 0.5:
        ap.error("--holdout must be in (0, 0.5)")
    return opts


def main(argv=None):
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    if opts.write_demo_tools or opts.write_all_tools:
        decls = demo_tools() if opts.write_demo_tools else [tool_schema(t, opts.compact) for t in TOOLS]
        write_json(opts.write_demo_tools or opts.write_all_tools, decls)
        return 0
    sp = None
    if opts.spm:
        import sentencepiece  # optional, only for token counts
        sp = sentencepiece.SentencePieceProcessor(model_file=opts.spm)
    os.makedirs(opts.out, exist_ok=True)
    stats = {"seed": opts.seed, "compact": opts.compact, "max_tools": opts.max_tools, "tools": len(TOOLS),
             "intents": len(INTENTS) + len(RECORDS), "templates": sum(len(i.templates) for i in INTENTS)}
    for split, n in (("train", opts.train), ("val", opts.val), ("test", opts.test)):
        rows, metas = generate(split, n, opts)
        write_jsonl(os.path.join(opts.out, split + ".jsonl"), rows)
        if opts.meta:
            write_jsonl(os.path.join(opts.out, split + ".meta.jsonl"), metas)
        stats[split] = length_stats(rows, sp)
        c = stats[split]["chars"]
        print("%-5s %6d rows  chars mean %.0f p50 %d p90 %d p99 %d max %d  off-topic %.3f" % (
            split, len(rows), c["mean"], c["p50"], c["p90"], c["p99"], c["max"], stats[split]["offtopic_rate"])
            + ("  tokens mean %.0f p99 %d max %d" % (stats[split]["tokens"]["mean"], stats[split]["tokens"]["p99"],
                                                     stats[split]["tokens"]["max"]) if sp else ""))
    write_json(os.path.join(opts.out, "stats.json"), stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
