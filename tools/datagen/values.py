"""values.py - open value pools and every common spelling of a value.

Each sampler returns a Slot: the text said in the request, the argument value
it implies, and any sibling arguments the same words imply ("68F" sets a
temperature and, when the tool has a unit parameter, the unit). Free-text
values come from Faker in many locales and from compositional templates, so
a model can only get them right by copying them from the request. Numbers,
times and dates are spelled in digits, words, 12/24-hour, with units and
symbols, and relative to a `date:` system fact.

Split disjointness: every free-text value is hashed into one split (80/10/10)
and a sampler draws again until its value belongs to the row's split.
"""
import datetime
import hashlib
import re
import sre_constants
import sre_parse

from faker import Faker
from num2words import num2words

SPLIT_OF_BUCKET = ["train"] * 8 + ["val", "test"]
# Latin-script locales (most requests) and others (names in their own script).
LATIN_LOCALES = ["en_US", "en_GB", "en_IN", "en_NG", "en_AU", "en_PH", "en_IE", "en_CA", "de_DE", "de_AT",
                 "fr_FR", "fr_CA", "es_ES", "es_MX", "es_AR", "es_CO", "it_IT", "pt_BR", "pt_PT", "nl_NL",
                 "pl_PL", "sv_SE", "no_NO", "da_DK", "fi_FI", "tr_TR", "vi_VN", "id_ID", "fil_PH", "yo_NG",
                 "zu_ZA", "cs_CZ", "ro_RO", "hu_HU", "hr_HR", "sk_SK", "lt_LT", "et_EE", "sw", "ga_IE"]
OTHER_LOCALES = ["ja_JP", "zh_CN", "ko_KR", "ru_RU", "el_GR", "hi_IN", "ar_AA", "he_IL", "th_TH", "uk_UA"]
RELATIONS = ["mom", "Mom", "dad", "Dad", "my sister", "my brother", "grandma", "Grandpa", "my wife", "my husband",
             "my boss", "my landlord", "the babysitter", "Auntie", "my son", "my daughter", "my partner",
             "the team", "my roommate", "my neighbour", "coach", "my doctor", "Nana", "Papa"]
ROOM_BASE = ["kitchen", "living room", "bedroom", "bathroom", "office", "hallway", "garage", "dining room",
             "porch", "basement", "guest room", "nursery", "patio", "attic", "laundry room", "den", "study",
             "master bedroom", "playroom", "loft", "closet", "pantry", "sunroom", "mudroom", "gym", "workshop",
             "cellar", "foyer", "landing", "balcony", "terrace", "stairs", "shed", "conservatory", "lounge",
             "media room", "library", "spare room", "utility room", "ensuite", "back garden", "driveway"]
ROOM_MODS = ["upstairs", "downstairs", "guest", "main", "small", "second", "kids'", "back", "front", "east",
             "west", "north", "south", "top floor", "ground floor", "big", "little", "new", "old", "lower"]
COLORS = ["red", "orange", "yellow", "green", "blue", "purple", "pink", "cyan", "white", "warm white",
          "magenta", "teal", "turquoise", "lavender", "amber", "gold", "violet", "indigo", "crimson", "lime",
          "navy", "maroon", "beige", "coral", "mint", "peach", "black", "grey", "brown", "salmon", "cool white"]
ADJECTIVES = ["blue", "silent", "golden", "broken", "midnight", "electric", "velvet", "lost", "wild", "paper",
              "summer", "northern", "little", "crystal", "hollow", "burning", "quiet", "bright", "endless",
              "secret", "neon", "rusty", "frozen", "lucky", "crooked", "sweet", "hidden", "distant", "gentle"]
NOUNS = ["river", "garden", "mirror", "engine", "harbor", "window", "machine", "lantern", "ocean", "highway",
         "letter", "season", "kingdom", "signal", "shadow", "island", "feather", "circus", "orchard", "echo",
         "compass", "canyon", "parade", "satellite", "meadow", "thunder", "ribbon", "avenue", "glacier"]
PRODUCT_NOUNS = ["oat milk", "AA batteries", "dish soap", "olive oil", "coffee beans", "paper towels", "rice",
                 "toothpaste", "laundry pods", "tortillas", "greek yogurt", "sourdough bread", "cherry tomatoes",
                 "trash bags", "basmati rice", "peanut butter", "almonds", "dog food", "sparkling water",
                 "light bulbs", "sunscreen", "shampoo", "green tea", "maple syrup", "chickpeas", "feta",
                 "ground coffee", "cat litter", "hand soap", "frozen peas", "HDMI cable", "phone charger",
                 "printer paper", "noodles", "soy sauce", "bananas", "avocados", "spinach", "eggs", "butter"]
PRODUCT_MODS = ["organic", "large", "small", "two packs of", "a bag of", "a box of", "extra", "unsalted",
                "gluten-free", "fresh", "a dozen", "three", "family-size", "low-fat", "spicy", "decaf"]
BUSINESS_KINDS = ["Bistro", "Bakery", "Cafe", "Diner", "Trattoria", "Deli", "Garage", "Pharmacy", "Books",
                  "Hardware", "Dental", "Yoga Studio", "Barbers", "Noodle Bar", "Taqueria", "Florist",
                  "Brewing Co.", "Kitchen", "Market", "Laundromat"]
CHITCHAT_TOPICS = ["the game", "the kids", "dinner", "the trip", "the weather", "work", "the party"]
MESSAGE_TEMPLATES = [
    "I'm running {n} minutes late", "meet me at {place} at {time}", "can you pick up {product} on the way home",
    "{name} says hi", "the meeting moved to {weekday}", "don't forget {product}", "I just landed in {city}",
    "happy birthday {name}!", "are we still on for {weekday}?", "call me when you're free",
    "dinner is at {time}", "I left the keys with {name}", "see you at {place}", "thanks for {event}",
    "can we push {event} to {weekday}", "the kids are with {name} tonight", "bring {product} please",
    "I'll be home by {time}", "parking is on level {n}", "running late, start {event} without me",
    "good luck with {event}!", "where did you put the {thing}?", "I'm outside {place}",
    "traffic is terrible, ETA {time}", "{event} is cancelled", "can you feed the cat before {time}",
    "the {thing} is fixed", "I got us tickets for {weekday}", "remember to call {name} back",
    "just left {place}, {n} min away", "let's do {business} tonight", "the plumber comes at {time}",
    "I owe you {n} bucks", "how was {event}?", "back in {n}", "lunch at {business}?",
    "I'm at {place}, where are you", "{name} can't make it to {event}", "order is ready at {business}",
    "pls text when you get to {city}", "flight delayed, now landing at {time}", "love you, see you soon",
    "grab {product} if you pass {business}", "the package from {business} arrived", "ok, {weekday} works",
]
# Short texts, as people send them: without these every generated message was 18-45 characters and the
# model learned that a short messaging request lacks its text (it answered "text Maya hello there" with
# no call). Kept apart from MESSAGE_TEMPLATES so that message() can pick one a quarter of the time.
SHORT_MESSAGES = [
    "hi", "hello!", "hey you", "ok", "okay, sounds good", "yes please", "no thanks", "sure", "got it",
    "thank you!", "thanks so much", "miss you", "love you", "good night", "sorry!",
    "call me", "call me back", "ring me later", "where are you?", "are you up?", "are you home?",
    "almost there", "nearly home", "home now", "just woke up", "be right there", "coming down",
    "I'm here", "I'm outside", "I'm downstairs", "at the door", "stuck in traffic", "bus is late",
    "train's delayed", "missed the bus", "start without me", "save me a seat", "go ahead and eat",
    "dinner's ready", "lunch?", "coffee later?", "pizza tonight?", "movie tonight?", "all good here",
    "congrats!!", "happy anniversary", "well done!", "get well soon", "safe travels", "drive safe",
    "text me when you land", "let me know when you're home", "can you talk?", "busy, will call later",
    "in a meeting", "back soon", "five more minutes", "leaving work now", "done for today",
    "need anything from the shop?", "bring a jacket", "don't forget your keys", "lock the door",
    "feed the dog", "the door is open", "it's raining here", "school's closed", "game's on",
    "see you soon", "see you tonight", "meet you at {place}", "at {place}",
    "back by {time}", "{n} minutes away", "running {n} min late", "pick me up at {time}?",
    "on the way to {place}", "call {name}", "ask {name}", "tell {name} thanks",
]
# Messages built from parts, so that no list of whole texts can be learnt: with texts drawn only from
# MESSAGE_TEMPLATES the model called send_message for "meet me at X at 5pm" and refused "dinner is
# ready" - it had learnt the templates, not "the words after 'that' are the message".
OPEN_SUBJECTS = ["I'm", "I am", "we're", "I'll be", "the kids are", "dad is", "mum's", "the car is", "the bus is",
                 "my phone is", "everything's", "the shop is", "the train is", "we'll be", "grandma is", "the dog is",
                 "the heating is", "the washing machine is", "the baby is", "the parcel is", "my boss is", "the lift is"]
OPEN_STATES = ["at {place}", "running late", "stuck in traffic", "almost home", "outside", "home by {time}",
               "free after {time}", "busy until {time}", "out of {product}", "done", "leaving in {n} minutes",
               "waiting by the {thing}", "back on {weekday}", "asleep", "at the doctor's", "still at work", "fine",
               "broken again", "on the way to {city}", "ready", "late again", "over at {name}'s", "off today",
               "in the garden", "upstairs", "at the gate", "parked outside {business}", "on {weekday}", "sorted"]
OPEN_ACTIONS = ["grab {product}", "pick up the kids", "call {name}", "feed the cat", "water the plants",
                "bring the {thing}", "lock the back door", "charge the {thing}", "move the car", "check the {thing}",
                "buy {product}", "pay the rent", "take out the bins", "walk the dog", "turn off the oven",
                "book a table at {business}", "save me some dinner", "wait for me", "start without me",
                "leave the key under the mat", "text me back", "reply to {name}", "ring the landlord",
                "send me the address", "open the garage", "pick me up from {place}", "look for the {thing}"]
OPEN_WHEN = ["", "", "", " tonight", " tomorrow", " after work", " before {time}", " on {weekday}", " this weekend",
             " later", " now", " at {time}", " first thing", " when you can"]
OPEN_FRAMES = ["{subject} {state}", "{subject} {state}{when}", "can you {action}{when}?", "please {action}{when}",
               "don't forget to {action}{when}", "remember to {action}", "could you {action}{when}", "{action}{when}",
               "{subject} {state}, {action}{when}", "thanks for {event}", "sorry about {event}",
               "good luck{when}", "see you{when}", "did you {action}?", "{subject} {state}. {action}?",
               "{state}{when}", "just {action}{when}", "heads up: {subject} {state}"]


EVENTS = ["the meeting", "practice", "the dentist", "book club", "the recital", "dinner", "the interview",
          "rehearsal", "the party", "yoga", "standup", "the game", "movie night", "the school run", "brunch"]
THINGS = ["charger", "umbrella", "remote", "car keys", "passport", "laptop", "ladder", "bike", "dishwasher",
          "wifi", "printer", "heater", "blender", "tent", "drill"]
QUERY_TEMPLATES = ["{product} recipes", "flights to {city}", "{business} opening hours", "how to fix a {thing}",
                   "{adj} {noun}", "best {product} near {city}", "{name} phone number", "tickets for {event}",
                   "{city} weather in {month}", "cheap {thing}", "{noun} documentary", "reviews of {business}"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
DAYPART = [(0, 5, "at night"), (5, 12, "in the morning"), (12, 18, "in the afternoon"), (18, 22, "in the evening"),
           (22, 24, "at night")]
# Unit enum values -> ways people write them after a number.
UNIT_SPELLINGS = {
    "ml": [" ml", "ml", " millilitres", " milliliters", " mL"], "bpm": [" bpm", " beats per minute", "bpm"],
    "celsius": ["°C", "C", " degrees celsius", " degrees C", "ºC", " celsius"],
    "fahrenheit": ["°F", "F", " degrees fahrenheit", " degrees F", " fahrenheit"],
    "kelvin": [" kelvin", "K"],
    "seconds": [" seconds", " secs", "s", " sec"], "minutes": [" minutes", " mins", " min"],
    "hours": [" hours", " hrs", "h"], "km": [" km", " kilometers", " kilometres"], "miles": [" miles", " mi"],
    "kilometers": [" km", " kilometers"], "meters": [" meters", " m"], "kg": [" kg", " kilos"],
    "lbs": [" lbs", " pounds"], "pounds": [" pounds", " lbs"], "grams": [" grams", " g"], "g": [" g", " grams"],
    "ml": [" ml", " millilitres"], "oz": [" oz", " ounces"], "percent": ["%", " percent"],
    "steps": [" steps"], "kcal": [" kcal", " calories"], "calories": [" calories", " kcal"],
}
MEASURE_UNITS = [(r"\bml\b|millilit", "ml"), (r"bpm|beats", "bpm"), (r"\bsteps\b", "steps"), (r"kcal|calories", "kcal"),
                 (r"\bkg\b|kilo", "kg"), (r"\bkm\b|kilomet", "km"), (r"miles", "miles"), (r"grams", "grams"),
                 (r"\blbs?\b|pounds", "lbs"), (r"meters|metres", "meters"), (r"ounces|\boz\b", "oz")]
CURRENCY_SPELLINGS = {"USD": ["${n}", "{n} dollars", "{n} USD", "US${n}"], "EUR": ["€{n}", "{n} euros", "{n} EUR", "{n}€"],
                      "GBP": ["£{n}", "{n} pounds", "{n} GBP"], "JPY": ["¥{n}", "{n} yen", "{n} JPY"],
                      "CAD": ["CA${n}", "{n} Canadian dollars", "{n} CAD"], "INR": ["₹{n}", "{n} rupees", "{n} INR"],
                      "CHF": ["CHF {n}", "{n} Swiss francs"], "AUD": ["A${n}", "{n} AUD", "{n} Australian dollars"],
                      "MXN": ["{n} pesos", "{n} MXN"], "CNY": ["{n} yuan", "{n} CNY"], "KRW": ["{n} won", "₩{n}"]}
# Enum families: values of the same family that a schema may leave out (for invalid requests).
ENUM_FAMILIES = [
    COLORS,
    ["heat", "cool", "auto", "off", "eco", "dry", "fan", "boost", "turbo", "sleep", "away", "vacation", "silent"],
    ["celsius", "fahrenheit", "kelvin", "rankine"],
    ["low", "medium", "high", "max", "ultra", "extreme", "minimum"],
    ["small", "medium", "large", "extra large", "huge", "tiny", "jumbo"],
    ["walking", "running", "cycling", "swimming", "rowing", "yoga", "hiking", "skiing", "boxing", "climbing",
     "dancing", "tennis", "golf", "surfing", "skating"],
    ["play", "pause", "stop", "next", "previous", "rewind", "fast forward", "eject", "record"],
    ["song", "album", "artist", "playlist", "podcast", "radio", "audiobook", "video", "ringtone"],
    ["daily", "weekly", "monthly", "yearly", "hourly", "fortnightly"],
    ["email", "sms", "phone", "push", "fax", "pager", "carrier pigeon"],
    ["work", "home", "mobile", "other", "school", "fax"],
    ["shuffle", "repeat", "repeat one", "normal", "random"],
]
GENERIC_INVALID_WORDS = ["banana", "turbo", "maximum overdrive", "purple-ish", "sideways", "extra spicy",
                         "ultra", "whatever", "rainbow", "party", "super", "infinite"]


_FAKERS = {}


def _one_line(v):
    return re.sub(r"\s*\n\s*", ", ", str(v)).strip()


LANGUAGES = ["French", "Spanish", "German", "Japanese", "Korean", "Mandarin", "Cantonese", "Swahili", "Yoruba",
             "Hindi", "Bengali", "Portuguese", "Italian", "Dutch", "Polish", "Turkish", "Arabic", "Hebrew", "Greek",
             "Vietnamese", "Thai", "Indonesian", "Tagalog", "Ukrainian", "Russian", "Czech", "Swedish", "Finnish",
             "Norwegian", "Danish", "Hungarian", "Romanian", "Zulu", "Amharic", "Persian", "Urdu", "Tamil", "Welsh",
             "Irish", "Catalan", "Basque", "Icelandic", "Malay", "Punjabi", "Hausa", "Igbo", "Somali", "Nepali"]


def bucket_of(value):
    h = hashlib.sha1(str(value).strip().lower().encode("utf-8")).digest()
    return SPLIT_OF_BUCKET[h[0] % 10]


def number_words(v):
    """Words for a number, sometimes without hyphens ("seventy two")."""
    return num2words(v)


def fmt_num(v):
    return str(int(v)) if float(v).is_integer() else ("%.2f" % v).rstrip("0").rstrip(".")


class Slot:
    """text: what the request says; value: the argument; extra: sibling
    arguments the same words imply; clause: a whole phrase (with its
    preposition) when the spelling needs one of its own."""

    def __init__(self, text, value, extra=None, clause=None, needs_date=False, lead=None):
        self.text, self.value, self.extra, self.clause, self.needs_date = text, value, extra or {}, clause, needs_date
        self.lead = lead  # (verb, adverb or "") when the value is said as the request's verb ("close")


# Share of number values drawn from the states a parameter's description names (value_anchors).
ANCHOR_SHARE = 0.25
ADVERBS = {"fully", "completely", "partly", "partially", "half", "all the way"}


def value_anchors(desc):
    """The values a description names by a state: "how open, in percent (0 closed, 100 fully open)"
    -> [(0, "closed"), (100, "fully open")]; also "1 = low", "5: high". Only inside parentheses, where
    descriptions list a scale's ends."""
    out = []
    for inner in re.findall(r"\(([^()]*)\)", desc or ""):
        for part in re.split(r"[,;]|\bor\b", inner):
            m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:=|:|-|means|is)?\s*([a-z][a-z ]*[a-z])\s*", part)
            if m and len(m.group(2).split()) <= 3:
                out.append((float(m.group(1)), m.group(2)))
    return out if len(out) >= 2 else []


def midpoint(anchors):
    """(value, "halfway") between a scale's two ends when the top end is "fully X" or "X":
    "0 closed, 100 fully open" -> (50, "halfway"); None otherwise."""
    if len(anchors) != 2:
        return None
    (lo, _), (hi, top) = sorted(anchors)
    mid = (lo + hi) / 2
    if not float(mid).is_integer() or state_verb(top)[0] is None:
        return None
    return mid, "halfway"


def state_verb(words):
    """(verb, adverb) for a state said as an action: "closed" -> ("close", ""), "fully open" ->
    ("open", "fully"), "halfway" -> (None, ""); (None, "") when no word of it is a verb."""
    from lemminflect import getAllLemmas  # a development dependency of the generator, like faker
    ws = words.split()
    adverb = " ".join(w for w in ws if w in ADVERBS)
    rest = [w for w in ws if w not in ADVERBS]
    if len(rest) != 1 or words == "halfway":
        return None, ""
    lemmas = getAllLemmas(rest[0]).get("VERB")
    # a participle ("closed", "locked", "muted") or one of the adjectives that are their own verb;
    # not any word that can be a verb ("low", "high")
    if not lemmas or (lemmas[0] == rest[0] and rest[0] not in ("open", "shut")):
        return None, ""
    return lemmas[0], adverb


class Values:
    def __init__(self, rng, split, today):
        self.rng, self.split, self.today = rng, split, today
        self._fakers = _FAKERS  # shared: building a Faker is slow; each use reseeds it

    # -- helpers -------------------------------------------------------------
    def faker(self, locale):
        f = self._fakers.get(locale)
        if f is None:
            f = self._fakers[locale] = Faker(locale)
        f.seed_instance(self.rng.getrandbits(48))
        return f

    def locale(self):
        return self.rng.choice(OTHER_LOCALES if self.rng.random() < 0.08 else LATIN_LOCALES)

    def fresh(self, make, tries=80):
        """A value from make() whose hash bucket is this split's."""
        v = make()
        for _ in range(tries):
            if bucket_of(v) == self.split:
                return v
            v = make()
        return v

    def _call(self, locale, what):
        try:
            f = self.faker(locale)
            if what == "first" and locale in ("ja_JP", "zh_CN") and self.rng.random() < 0.5:
                return f.first_romanized_name()
            return _one_line({"first": f.first_name, "last": f.last_name, "city": f.city, "company": f.company,
                        "street": f.street_address, "country": f.country, "phone": f.phone_number,
                        "word": f.word, "sentence": f.sentence}[what]())
        except (AttributeError, KeyError, ValueError):
            return self._call("en_US", what) if locale != "en_US" else "Alex"

    # -- people, places, things ----------------------------------------------
    def person(self):
        def make():
            r = self.rng.random()
            loc = self.locale()
            if r < 0.1:
                return self.rng.choice(RELATIONS)
            if r < 0.55:
                return self._call(loc, "first")
            if r < 0.95:
                return self._call(loc, "first") + " " + self._call(loc, "last")
            return self.rng.choice(["Dr. ", "Ms. ", "Mr. ", "Coach "]) + self._call(loc, "last")
        return self.fresh(make)

    def city(self):
        return self.fresh(lambda: self._call(self.rng.choice(LATIN_LOCALES), "city"))

    def place(self):
        def make():
            r = self.rng.random()
            loc = self.rng.choice(LATIN_LOCALES)
            if r < 0.6:
                return self._call(loc, "city")
            if r < 0.7:
                return self._call(loc, "city") + ", " + self._call("en_US", "country")
            if r < 0.85:
                return self._call("en_US", "country")
            return self.rng.choice(["the ", ""]) + self._call(self.locale(), "last") + " " + \
                self.rng.choice(["Station", "Park", "Museum", "Square", "Airport", "Stadium", "Mall", "Library"])
        return self.fresh(make)

    def address(self):
        return self.fresh(lambda: self._call(self.rng.choice(["en_US", "en_GB", "de_DE", "fr_FR", "es_ES",
                                                                "it_IT", "nl_NL", "en_AU"]), "street"))

    def room(self):
        def make():
            r = self.rng.random()
            if r < 0.45:
                return self.rng.choice(ROOM_BASE)
            if r < 0.85:
                return self.rng.choice(ROOM_MODS) + " " + self.rng.choice(ROOM_BASE)
            return self._call(self.locale(), "first") + "'s " + self.rng.choice(["room", "bedroom", "office", "study"])
        return self.fresh(make)

    def business(self):
        def make():
            r = self.rng.random()
            if r < 0.5:
                return self._call(self.rng.choice(LATIN_LOCALES), "company")
            return self._call(self.rng.choice(LATIN_LOCALES), "last") + ("'s " if r < 0.75 else " ") + \
                self.rng.choice(BUSINESS_KINDS)
        return self.fresh(make)

    def product(self):
        def make():
            p = self.rng.choice(PRODUCT_NOUNS)
            r = self.rng.random()
            if r < 0.3:
                p = self.rng.choice(PRODUCT_MODS) + " " + p
            elif r < 0.45:
                p = self._call(self.rng.choice(LATIN_LOCALES), "last") + " " + p
            elif r < 0.6:
                p = self.rng.choice(ADJECTIVES) + " " + self.rng.choice(NOUNS) + " " + \
                    self.rng.choice(["lamp", "mug", "rug", "candle", "notebook", "speaker", "blanket", "poster"])
            return p
        return self.fresh(make)

    def title(self):
        def make():
            r = self.rng.random()
            if r < 0.35:
                return self.rng.choice(ADJECTIVES).capitalize() + " " + self.rng.choice(NOUNS).capitalize()
            if r < 0.55:
                return "The " + self.rng.choice(NOUNS).capitalize() + " " + self.rng.choice(["Song", "Waltz", "Blues",
                                                                                             "Diaries", "Affair", "Code"])
            if r < 0.8:
                return self.rng.choice(EVENTS + ["team lunch", "quarterly review", "pay rent", "vet appointment",
                                                 "call the bank", "water the plants", "renew passport"]) + \
                    self.rng.choice(["", " with " + self._call(self.locale(), "first"), " at " + self.business()])
            return self._call("en_US", "word").capitalize() + " " + self.rng.choice(NOUNS)
        return self.fresh(make)

    def media(self):
        r = self.rng.random()
        if r < 0.55:
            return self.title()
        if r < 0.85:
            return self.artist()
        return self.fresh(lambda: self.rng.choice(ADJECTIVES) + " " + self.rng.choice(["vibes", "mix", "hits", "classics",
                                                                                       "session", "beats", "anthems"]))

    def artist(self):
        def make():
            r = self.rng.random()
            if r < 0.5:
                loc = self.locale()
                return self._call(loc, "first") + " " + self._call(loc, "last")
            if r < 0.8:
                return "The " + self.rng.choice(ADJECTIVES).capitalize() + " " + self.rng.choice(NOUNS).capitalize() + "s"
            return self._call(self.locale(), "last") + self.rng.choice([" Trio", " Quartet", " & the Hollows", ""])
        return self.fresh(make)

    def fill(self, template):
        """A template with {name} {place} ... slots filled from the open pools."""
        def rep(m):
            k = m.group(1)
            return {"name": lambda: self.person() if self.rng.random() < 0.3 else self._call(self.locale(), "first"),
                    "place": self.place, "city": self.city, "time": lambda: self.time_slot(plain=True).text,
                    "n": lambda: str(self.rng.randint(2, 45)), "weekday": lambda: self.rng.choice(WEEKDAYS),
                    "product": self.product, "business": self.business, "event": lambda: self.rng.choice(EVENTS),
                    "thing": lambda: self.rng.choice(THINGS), "adj": lambda: self.rng.choice(ADJECTIVES),
                    "noun": lambda: self.rng.choice(NOUNS), "month": lambda: self.rng.choice(MONTHS)}[k]()
        return re.sub(r"\{(\w+)\}", rep, template)

    def message(self):
        def make():
            r = self.rng.random()
            if r < 0.45:
                return self.open_message()
            return self.fill(self.rng.choice(SHORT_MESSAGES if r < 0.7 else MESSAGE_TEMPLATES))
        return self.fresh(make)

    def open_message(self):
        """A message put together from parts (OPEN_FRAMES), or now and then a few words of Faker's."""
        if self.rng.random() < 0.12:
            words = self._call("en_US", "sentence").rstrip(".").split()
            return " ".join(words[:self.rng.randint(2, 6)]).lower()
        rng = self.rng
        text = rng.choice(OPEN_FRAMES)
        parts = {"subject": rng.choice(OPEN_SUBJECTS), "state": rng.choice(OPEN_STATES),
                 "action": rng.choice(OPEN_ACTIONS), "when": rng.choice(OPEN_WHEN)}
        text = re.sub(r"\{(subject|state|action|when)\}", lambda m: parts[m.group(1)], text)
        return self.fill(text)

    def query_text(self):
        return self.fresh(lambda: self.fill(self.rng.choice(QUERY_TEMPLATES)))

    def words(self):
        def make():
            r = self.rng.random()
            if r < 0.4:
                return self.rng.choice(ADJECTIVES) + " " + self.rng.choice(NOUNS)
            if r < 0.7:
                return self._call("en_US", "word") + " " + self.rng.choice(NOUNS)
            return self.title()
        return self.fresh(make)

    def email(self):
        def make():
            loc = self.rng.choice(LATIN_LOCALES)
            first = re.sub(r"[^a-z]", "", self._call(loc, "first").lower()) or "sam"
            last = re.sub(r"[^a-z]", "", self._call(loc, "last").lower()) or "lee"
            user = self.rng.choice([first, first + "." + last, first[0] + last, first + str(self.rng.randint(1, 99))])
            dom = self.rng.choice(["gmail.com", "outlook.com", "yahoo.com", "proton.me", "icloud.com",
                                   re.sub(r"[^a-z]", "", self._call("en_US", "last").lower()) + ".com"])
            return user + "@" + dom
        return self.fresh(make)

    def phone(self):
        return self.fresh(lambda: self._call(self.rng.choice(["en_US", "en_GB", "de_DE", "fr_FR", "en_IN",
                                                                "es_ES", "en_AU", "it_IT"]), "phone"))

    def identifier(self):
        """A code a system issued ("ORD-48213", "1Z84A6170392", "INV-2025-0042"), said as written."""
        def make():
            r = self.rng.random()
            digits = lambda n: "".join(self.rng.choice("0123456789") for _ in range(n))
            upper = lambda n: "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(n))
            if r < 0.3:
                return self.rng.choice(["ORD", "INV", "ACC", "REF", "TKT", "BK", "SO"]) + "-" + digits(
                    self.rng.randint(4, 7))
            if r < 0.5:
                return upper(2) + digits(self.rng.randint(6, 10))
            if r < 0.65:
                return "1Z" + upper(3) + digits(9)
            if r < 0.8:
                return digits(self.rng.randint(6, 12))
            if r < 0.9:
                return upper(3) + "-" + digits(4) + "-" + upper(2)
            return self.rng.choice(["INV", "PO", "CASE"]) + "-" + str(self.rng.randint(2020, 2027)) + "-" + digits(4)
        return self.fresh(make)

    def hostname(self):
        return self.fresh(lambda: self.rng.choice(["", "api.", "mail.", "files.", "vpn.", "shop."]) +
                          re.sub(r"[^a-z]", "", self._call("en_US", "last").lower()) +
                          self.rng.choice([".com", ".org", ".io", ".net", ".dev", ".co.uk"]))

    def ipv4(self):
        return self.fresh(lambda: self.rng.choice(["192.168.%d.%d", "10.0.%d.%d", "172.16.%d.%d"]) % (
            self.rng.randint(0, 255), self.rng.randint(1, 254)) if self.rng.random() < 0.7 else
            "%d.%d.%d.%d" % tuple(self.rng.randint(1, 254) for _ in range(4)))

    def uuid(self):
        return self.fresh(lambda: "-".join("".join(self.rng.choice("0123456789abcdef") for _ in range(n))
                                           for n in (8, 4, 4, 4, 12)))

    def url(self):
        return self.fresh(lambda: "https://" + self.rng.choice(["www.", ""]) +
                          re.sub(r"[^a-z]", "", self._call("en_US", "last").lower()) +
                          self.rng.choice([".com", ".org", ".io", ".net"]) + self.rng.choice(["", "/menu", "/docs"]))

    # -- numbers -------------------------------------------------------------
    def number_in(self, p, lo, hi, decimals=False):
        """Typical values [lo, hi] clipped to the schema's range (a quarter of
        the time anywhere in the schema's range)."""
        smin = p.minimum + (1 if p.exclusive[0] else 0) if p.minimum is not None else None
        smax = p.maximum - (1 if p.exclusive[1] else 0) if p.maximum is not None else None
        wide = self.rng.random() < 0.25
        if smin is not None:
            lo = smin if wide or lo < smin or (smax is not None and lo > smax) else lo
        if smax is not None:
            hi = smax if wide or hi > smax or hi < lo else hi
        if lo > hi:
            lo, hi = hi, lo
        lo_i, hi_i = int(-(-lo // 1)), int(hi // 1)
        fractional = any(b is not None and not float(b).is_integer() for b in (p.minimum, p.maximum))
        if p.type == "number" and fractional and self.rng.random() < 0.5:  # 87.5-108 (MHz): "98.4"
            v = round(self.rng.uniform(lo, hi), 1)
            return v if lo <= v <= hi else float(lo_i)
        if p.type == "number" and (decimals or hi - lo < 3) and self.rng.random() < 0.35:
            v = round(self.rng.uniform(lo, hi) * 2) / 2
            return v if lo <= v <= hi else float(lo_i)
        if lo_i > hi_i:
            return lo
        v = self.rng.randint(lo_i, hi_i)
        if hi_i - lo_i > 30 and self.rng.random() < 0.5:
            v = min(hi_i, max(lo_i, int(round(v / 5.0) * 5)))
        return v

    def spell_number(self, v):
        r = self.rng.random()
        if float(v).is_integer():
            v = int(v)
        if r < 0.62 or abs(v) > 999 or not float(v).is_integer() and (abs(v) > 99 or not float(v * 2).is_integer()):
            return fmt_num(v)  # "98.4", not "ninety-eight point four"
        w = number_words(v)
        return w.replace("-", " ") if r < 0.72 else w

    def with_unit(self, text, spellings):
        """A unit after a number: "68F" after digits, but "sixty-eight degrees F", never "sixty-eightF"."""
        if not text[-1:].isdigit():
            spellings = [u for u in spellings if u.startswith(" ")] or [""]
        return self.rng.choice(spellings)

    def plain_number(self, p):
        """A number said without units or symbols (when a sibling's value must not be implied)."""
        lo, hi = {"temperature": (16, 30), "percent": (1, 100), "duration": (1, 90), "money": (1, 500)}.get(p.kind, (1, 100))
        v = self.number_in(p, lo, hi)
        return Slot(self.spell_number(v), v)

    def number_slot(self, p, tool):
        kind = p.kind
        unit_param = self.unit_sibling(p, tool)
        if kind == "temperature":
            unit = None
            if unit_param and self.rng.random() < 0.7:
                unit = self.rng.choice([u for u in unit_param.enum if u in UNIT_SPELLINGS])
            lo, hi = (60, 85) if unit == "fahrenheit" else (16, 30)
            v = self.number_in(p, lo, hi, decimals=True)
            text = self.spell_number(v)
            extra = {}
            if unit:
                sp = self.rng.choice(UNIT_SPELLINGS[unit])
                if not sp.startswith(" ") and not text[:1].isdigit():
                    sp = " degrees " + unit
                text += sp
                extra[unit_param.name] = unit
            elif self.rng.random() < 0.5:
                text += " degrees"
            return Slot(text, v, extra)
        if kind == "percent":
            v = self.number_in(p, 1, 100)
            text = self.spell_number(v)
            r = self.rng.random()
            if r < 0.45 and text[:1].isdigit():
                text += "%"
            elif r < 0.8:
                text += " percent"
            return Slot(text, v)
        if kind == "duration":
            return self.duration_slot(p, tool, unit_param)
        if kind == "measure":
            return self.measure_slot(p)
        if kind == "money":
            v = self.number_in(p, 1, 500)
            cur = self.currency_sibling(tool)
            if p.type == "number" and self.rng.random() < 0.3:
                v = round(v + self.rng.choice([0.5, 0.25, 0.99, 0.1]), 2)
                if p.maximum is not None and v > p.maximum:
                    v = float(int(v))
            r = self.rng.random()
            s = fmt_num(v) if not float(v).is_integer() else str(int(v))
            if cur is not None:
                codes = [c for c in cur.enum if c in CURRENCY_SPELLINGS]
                if codes and self.rng.random() < 0.7:
                    code = self.rng.choice(codes)
                    return Slot(self.rng.choice(CURRENCY_SPELLINGS[code]).replace("{n}", s),
                                int(v) if p.type == "integer" else v, {cur.name: code})
                return Slot(s, int(v) if p.type == "integer" else v)  # "$" would say USD
            text = "$" + s if r < 0.4 else (s + " dollars" if r < 0.6 else (
                self.spell_number(v) + (" bucks" if r < 0.7 else " dollars") if float(v).is_integer() else s))
            return Slot(text, int(v) if p.type == "integer" else v)
        if unit_param and self.rng.random() < 0.6:
            unit = self.rng.choice([u for u in unit_param.enum if u in UNIT_SPELLINGS])
            v = self.number_in(p, 1, 60)
            text = self.spell_number(v)
            return Slot(text + self.with_unit(text, UNIT_SPELLINGS[unit]), v, {unit_param.name: unit})
        v = self.number_in(p, 1, 20 if kind == "count" else 500)
        return Slot(self.spell_number(v), v)

    def anchor_slot(self, p):
        """Sometimes a value the parameter's description names by a state ("0 closed, 100 fully
        open"), said as that state: "close the blinds", "open the window all the way", "halfway".
        None otherwise (and always when the description names no states)."""
        anchors = [(v, w) for v, w in value_anchors(p.desc) if self._in_range(p, v)]
        if not anchors or self.rng.random() >= ANCHOR_SHARE:
            return None
        mid = midpoint(anchors)
        v, words = self.rng.choice(anchors + ([mid] if mid else []))
        v = int(v) if p.type == "integer" or float(v).is_integer() else v
        verb, adverb = state_verb(words)
        if verb and self.rng.random() < 0.7:  # "close the blinds", "open the window all the way"
            return Slot(words, v, lead=(verb, adverb))
        if words == "halfway":
            return Slot(words, v, clause=self.rng.choice(["halfway", "halfway", "half way"]))
        return Slot(words, v, clause=self.rng.choice(["to " + words, words]))

    def measure_slot(self, p):
        w = p.words
        unit = next((u for rx, u in MEASURE_UNITS if re.search(rx, w)), None)
        lo, hi = {"ml": (100, 1500), "bpm": (90, 190), "steps": (1000, 20000), "kcal": (100, 900)}.get(unit, (1, 100))
        v = self.number_in(p, lo, hi)
        specials = {("ml", 1000): ["a litre", "one liter", "1 L", "1000ml"], ("ml", 500): ["half a litre", "0.5 l"],
                    ("ml", 1500): ["1.5 litres", "one and a half liters"], ("ml", 250): ["a quarter litre", "250 ml"],
                    ("ml", 2000): ["two litres", "2 liters"], ("ml", 750): ["0.75 litres", "750 millilitres"]}
        keys = [k for k in specials if k[0] == unit and self._in_range(p, k[1])]
        if keys and self.rng.random() < 0.3:
            k = self.rng.choice(keys)
            return Slot(self.rng.choice(specials[k]), k[1])
        sp = UNIT_SPELLINGS.get(unit, [""]) if unit else [""]
        text = self.spell_number(v)
        return Slot(text + self.with_unit(text, sp), v)

    def duration_slot(self, p, tool, unit_param):
        words = p.words
        base = "seconds" if re.search(r"sec", words) else "hours" if re.search(r"hour", words) and not \
            re.search(r"min", words) else "minutes"
        v = self.number_in(p, 1, 90 if base != "hours" else 12)
        special = {("minutes", 30): ["half an hour", "30 minutes"], ("minutes", 15): ["a quarter of an hour", "15 min"],
                   ("minutes", 60): ["an hour", "one hour", "60 minutes"], ("minutes", 90): ["an hour and a half", "90 minutes"],
                   ("minutes", 45): ["three quarters of an hour", "45 mins"], ("minutes", 120): ["two hours"],
                   ("seconds", 60): ["a minute", "one minute"], ("seconds", 90): ["a minute and a half"],
                   ("seconds", 30): ["half a minute", "30 seconds"], ("seconds", 120): ["two minutes", "2 minutes"],
                   ("seconds", 180): ["three minutes", "3 min"], ("seconds", 300): ["five minutes", "5 minutes"],
                   ("minutes", 180): ["three hours"], ("hours", 24): ["a day", "24 hours"]}
        keys = [k for k in special if k[0] == base and self._in_range(p, k[1])]
        if keys and self.rng.random() < 0.3:
            k = self.rng.choice(keys)
            return Slot(self.rng.choice(special[k]), k[1])
        if unit_param is not None and self.rng.random() < 0.6:
            unit = self.rng.choice([u for u in unit_param.enum if u in UNIT_SPELLINGS] or [None])
            if unit:
                text = self.spell_number(v)
                return Slot(text + self.with_unit(text, UNIT_SPELLINGS[unit]), v, {unit_param.name: unit})
        sp = UNIT_SPELLINGS[base]
        text = self.spell_number(v)
        return Slot(text + (self.with_unit(text, sp) if self.rng.random() < 0.9 else ""), v)

    def currency_sibling(self, tool):
        if tool is None:
            return None
        return next((q for q in tool.params if q.kind == "enum" and all(isinstance(c, str) for c in q.enum) and
                     sum(c in CURRENCY_SPELLINGS for c in q.enum) >= 2), None)

    def _in_range(self, p, v):
        return (p.minimum is None or v >= p.minimum) and (p.maximum is None or v <= p.maximum)

    def unit_sibling(self, p, tool):
        if tool is None:
            return None
        for q in tool.params:
            if q is not p and q.kind == "enum" and all(isinstance(u, str) for u in q.enum) and \
                    sum(u in UNIT_SPELLINGS for u in q.enum) >= 1 and re.search(r"unit|scale|measure", q.words):
                return q
        return None

    # -- times and dates -----------------------------------------------------
    def time_value(self, h, m, p=None):
        if p is not None and p.format == "time":
            # JSON Schema's "time" is RFC 3339's full-time: seconds and an offset (no zone is said,
            # so UTC's "Z", the one a tool reading it treats as given)
            return "%02d:%02d:00Z" % (h, m)
        cands = ["%02d:%02d" % (h, m), "%02d:%02d:00" % (h, m), "%d:%02d" % (h, m)]
        if p is not None and p.pattern:
            try:
                rx = re.compile(p.pattern)
                for c in cands:
                    if rx.search(c):
                        return c
            except re.error:
                pass
        return cands[0]

    def spell_time(self, h, m, plain=False):
        """A way to say h:m that a listener resolves to exactly h:m."""
        h12 = h % 12 or 12
        ampm = "am" if h < 12 else "pm"
        part = next(w for lo, hi, w in DAYPART if lo <= h < hi)
        opts = ["%02d:%02d" % (h, m) if h < 10 and self.rng.random() < 0.5 else "%d:%02d" % (h, m)] \
            if h >= 13 or h == 0 or self.rng.random() < 0.3 else []
        opts += ["%d:%02d %s" % (h12, m, ampm), "%d:%02d%s" % (h12, m, ampm), "%d.%02d%s" % (h12, m, ampm),
                 "%d:%02d %s" % (h12, m, ampm.upper()), "%d:%02d %s" % (h12, m, part)]
        if m == 0:
            opts += ["%d%s" % (h12, ampm), "%d %s" % (h12, ampm), "%d o'clock %s" % (h12, part),
                     "%s %s" % (num2words(h12), part)]
            if (h, m) == (12, 0):
                opts += ["noon", "midday", "12 noon"]
            if (h, m) == (0, 0):
                opts += ["midnight"]
        if m == 30:
            opts += ["half past %s %s" % (num2words(h12), part), "half past %d %s" % (h12, part)]
        if m == 15:
            opts += ["quarter past %s %s" % (num2words(h12), part), "a quarter past %d%s" % (h12, ampm)]
        if m == 45:
            n12 = (h + 1) % 12 or 12
            npart = next(w for lo, hi, w in DAYPART if lo <= (h + 1) % 24 < hi)
            if (h + 1) % 12 == 0:
                opts += ["quarter to " + ("noon" if h == 11 else "midnight")]
            else:
                opts += ["quarter to %s %s" % (num2words(n12), npart), "a quarter to %d %s" % (n12, npart)]
        if m and m % 5 == 0 and m != 30:
            opts += ["%s %s %s" % (num2words(h12), num2words(m).replace("-", " "), ampm)]
        if 5 <= h <= 11 and not plain and m:
            opts += ["%d:%02d" % (h, m)]  # a bare morning time: alarms, "7:30" = 07:30
        return self.rng.choice(opts)

    def time_slot(self, p=None, plain=False):
        h = self.rng.choice(list(range(24)) + list(range(6, 22)))
        m = self.rng.choice([0, 0, 15, 30, 30, 45, 10, 20, 40, 50, 5, 55]) if self.rng.random() < 0.85 else \
            self.rng.randrange(60)
        return Slot(self.spell_time(h, m, plain), self.time_value(h, m, p))

    def date_slot(self, p=None):
        """A date said absolutely (with a year), or relative to today when a
        `date:` fact is present (needs_date)."""
        today = self.today
        if today is None or self.rng.random() < 0.25:
            base = today or datetime.date(2025, 1, 1) + datetime.timedelta(days=self.rng.randrange(1200))
            d = base + datetime.timedelta(days=self.rng.randrange(0, 400))
            mon, day, yr = MONTHS[d.month - 1], d.day, d.year
            ordn = num2words(day, to="ordinal_num")
            text = self.rng.choice([d.isoformat(), "%s %d, %d" % (mon, day, yr), "%d %s %d" % (day, mon, yr),
                                    "%s %s %d" % (mon, ordn, yr), "the %s of %s %d" % (ordn, mon, yr),
                                    "%s %d %d" % (mon[:3], day, yr)])
            return Slot(text, d.isoformat(), clause=("on " if self.rng.random() < 0.7 else "for ") + text)
        delta = self.rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 7, 10, 14, 20, 45, 90, 200])
        d = today + datetime.timedelta(days=delta)
        wd = WEEKDAYS[d.weekday()]
        opts = []
        if delta == 0:
            opts += [("today", "today"), ("today", "for today")]
        if delta == 1:
            opts += [("tomorrow", "tomorrow"), ("tomorrow", "for tomorrow")]
        if delta == 2:
            opts += [("the day after tomorrow", "the day after tomorrow"), ("in two days", "in two days")]
        if 2 <= delta <= 6:
            opts += [(wd, "on " + wd), ("this " + wd, "this " + wd), ("in %d days" % delta, "in %d days" % delta)]
        if delta == 7:
            opts += [("a week from today", "a week from today"), ("in a week", "in a week")]
        if delta == 14:
            opts += [("in two weeks", "in two weeks")]
        ordn = num2words(d.day, to="ordinal_num")
        mon = MONTHS[d.month - 1]
        for t in ["%s %d" % (mon, d.day), "%d %s" % (d.day, mon), "%s %s" % (mon, ordn), "the %s of %s" % (ordn, mon)]:
            opts.append((t, "on " + t))
        if delta < 25 and d.month == today.month:
            opts.append(("the " + ordn, "on the " + ordn))
        text, clause = self.rng.choice(opts)
        return Slot(text, d.isoformat(), clause=clause, needs_date=True)

    def datetime_slot(self, p=None):
        d = self.date_slot(p)
        t = self.time_slot(None)
        text = d.clause + " at " + t.text
        # RFC 3339 date-time (JSON Schema's "date-time"): seconds and an offset, "Z" (no zone is said)
        return Slot(text, d.value + "T" + t.value + ":00Z", clause=text, needs_date=d.needs_date)

    # -- patterns --------------------------------------------------------------
    def pattern_value(self, pattern):
        """A string matching a regular expression (sampled from its parse tree)."""
        try:
            tree = sre_parse.parse(pattern)
        except (re.error, sre_constants.error if hasattr(sre_constants, "error") else re.error):
            return None
        out = []
        ok = self._emit(tree, out, 0)
        s = "".join(out)
        try:
            return s if ok and re.search(pattern, s) else None
        except re.error:
            return None

    def _emit(self, tree, out, depth):
        if depth > 20:
            return False
        for op, av in tree:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(av))
            elif name == "NOT_LITERAL":
                out.append("x" if chr(av) != "x" else "y")
            elif name == "ANY":
                out.append(self.rng.choice("abcdefghjkmnpqrstuvwxyz0123456789"))
            elif name == "IN":
                chars = []
                for iop, iav in av:
                    n = str(iop)
                    if n == "LITERAL":
                        chars.append(chr(iav))
                    elif n == "RANGE":
                        chars += [chr(c) for c in range(iav[0], iav[1] + 1)]
                    elif n == "CATEGORY":
                        c = str(iav)
                        chars += list("0123456789") if "DIGIT" in c and "NOT" not in c else \
                            list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") if "WORD" in c \
                            else [" "] if "SPACE" in c else ["x"]
                    elif n == "NEGATE":
                        return False
                if not chars:
                    return False
                out.append(self.rng.choice(chars))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = av
                hi = min(hi, lo + 4) if hi != sre_constants.MAXREPEAT else lo + self.rng.randint(0, 4)
                for _ in range(self.rng.randint(lo, max(lo, hi))):
                    if not self._emit(sub, out, depth + 1):
                        return False
            elif name == "SUBPATTERN":
                if not self._emit(av[-1], out, depth + 1):
                    return False
            elif name == "BRANCH":
                if not self._emit(self.rng.choice(av[1]), out, depth + 1):
                    return False
            elif name in ("AT",):
                continue
            elif name == "CATEGORY":
                c = str(av)
                out.append(self.rng.choice("0123456789") if "DIGIT" in c else "a" if "WORD" in c else " ")
            else:
                return False
        return True

    # -- one parameter -----------------------------------------------------------
    def sample(self, p, tool=None):
        """A Slot for parameter p, or None when this generator cannot say a value for it.  A
        string value also keeps to the schema's minLength / maxLength (code points): values are
        drawn again, then an identifier of a fitting length is tried."""
        lo, hi = p.schema.get("minLength"), p.schema.get("maxLength")
        if p.type != "string" or (lo is None and hi is None) or p.kind == "enum":
            return self._sample(p, tool)
        fits = lambda v: isinstance(v, str) and (lo is None or len(v) >= lo) and (hi is None or len(v) <= hi)
        for _ in range(12):
            s = self._sample(p, tool)
            if s is None or fits(s.value):
                return s
        if p.kind not in ("identifier", "pattern", "date", "datetime", "time", "email", "url", "hostname", "ipv4",
                          "uuid"):
            for _ in range(40):
                v = self.identifier()
                if fits(v):
                    return Slot(v, v)
        return None

    def _sample(self, p, tool=None):
        k = p.kind
        if k == "enum":
            v = self.rng.choice(p.enum)
            text = str(v) if not isinstance(v, str) else v
            if "_" in text and self.rng.random() < 0.75:
                text = text.replace("_", " ")  # people say "heart rate", not "heart_rate"
            return Slot(text, v)
        if k == "bool":
            v = self.rng.random() < 0.5
            return Slot("", v)
        if k in ("temperature", "percent", "duration", "money", "count", "number", "measure"):
            anchored = self.anchor_slot(p)
            return anchored if anchored is not None else self.number_slot(p, tool)
        if k == "time":
            return self.time_slot(p)
        if k == "date":
            return self.date_slot(p)
        if k == "datetime":
            return self.datetime_slot(p)
        if k == "pattern":
            v = self.fresh(lambda: self.pattern_value(p.pattern) or "", tries=30)
            return Slot(v, v) if v else None
        if k == "array":
            return self.array_slot(p, tool)
        if k == "object":
            return self.object_slot(p, tool)
        maker = {"person": self.person, "place": self.place, "address": self.address, "room": self.room,
                 "business": self.business, "product": self.product, "title": self.title, "media": self.media,
                 "artist": self.artist, "message": self.message, "query": self.query_text, "email": self.email,
                 "phone": self.phone, "url": self.url, "words": self.words, "city": self.city,
                 "identifier": self.identifier, "hostname": self.hostname, "ipv4": self.ipv4, "uuid": self.uuid,
                 "language": lambda: self.fresh(lambda: self.rng.choice(LANGUAGES))}[k]
        v = maker()
        return Slot(v, v)

    def object_slot(self, p, tool):
        """A nested object: its required fields and some optional ones, said as "field value" pairs."""
        parts, value = [], {}
        for c in p.children:
            if not (c.required or self.rng.random() < 0.4):
                continue
            s = self.sample(c, None)
            if s is None or (c.kind == "bool" and not s.text):
                if c.required and c.kind != "bool":
                    return None
                if c.kind == "bool" and c.required:
                    s = Slot("yes" if s.value else "no", s.value)
                else:
                    continue
            value[c.name] = s.value
            parts.append(s.clause or (c.human + " " + s.text))
        if not value:
            return None
        return Slot(join_list(parts, self.rng), value, needs_date=False)

    def array_slot(self, p, tool):
        it = p.items
        lo = p.schema.get("minItems", 1)
        hi = min(p.schema.get("maxItems", 3), 4)
        if it.kind == "enum" and set(it.enum) >= set(WEEKDAYS):
            r = self.rng.random()
            if r < 0.25:
                days, said = (WEEKDAYS[:5], ["on weekdays", "every weekday", "Monday to Friday"]) if r < 0.15 else \
                    (WEEKDAYS[5:], ["on weekends", "every weekend", "on Saturdays and Sundays"])
                clause = self.rng.choice(said)
                return Slot(clause.split(" ", 1)[1] if clause.startswith(("on ", "every ")) else clause, days,
                            clause=clause)
            days = sorted(self.rng.sample(WEEKDAYS, self.rng.randint(1, 3)), key=WEEKDAYS.index)
            plural = self.rng.random() < 0.5
            said = join_list([d + "s" if plural else d for d in days], self.rng)
            return Slot(said, days, clause=("every " if not plural else "on ") + said)
        n = self.rng.randint(max(1, lo), max(lo, hi, 1))
        if it.kind == "enum":
            n = min(n, len(it.enum))
            vals = self.rng.sample(list(it.enum), n)
            return Slot(join_list([str(v) for v in vals], self.rng), vals)
        slots = []
        for _ in range(n):
            s = self.sample(it, tool)
            if s is None or s.extra:
                return None
            if any(s.value == o.value for o in slots):
                continue
            slots.append(s)
        return Slot(join_list([s.text for s in slots], self.rng), [s.value for s in slots],
                    needs_date=any(s.needs_date for s in slots))

    # -- values outside the schema ----------------------------------------------
    def invalid(self, p, tool=None):
        """A Slot whose value the schema rejects, said plainly, or None."""
        k = p.kind
        if p.type in ("integer", "number") and (p.minimum is not None or p.maximum is not None):
            cands = []
            if p.maximum is not None:
                mx = p.maximum
                cands += [mx + self.rng.choice([1, 5, 10, 20, 50]) if mx < 50 else mx + self.rng.choice([1, 10, 50, mx])]
            if p.minimum is not None and p.minimum >= 0:
                cands += [-self.rng.choice([1, 5, 10, 20])] + ([p.minimum - 1] if p.minimum >= 1 and p.minimum - 1 > 0 else [])
            v = int(self.rng.choice(cands))
            text = self.spell_number(v) if v >= 0 else "minus " + str(-v)
            if k == "percent":
                text += "%" if text[:1].isdigit() and self.rng.random() < 0.5 else " percent"
            elif k == "temperature":
                text += " degrees"
            elif k == "duration":
                text += " " + ("seconds" if "sec" in p.words else "minutes")
            return Slot(text, v)
        if k == "enum" and all(isinstance(e, str) for e in p.enum):
            have = {e.lower() for e in p.enum}
            fams = [f for f in ENUM_FAMILIES if len(have & set(f)) >= min(2, len(have))]
            pool = [w for f in fams for w in f if w.lower() not in have]
            if not pool:
                pool = [w for w in GENERIC_INVALID_WORDS if w not in have]
            v = self.rng.choice(pool)
            return Slot(v, v)
        if k == "time":
            h, m = self.rng.choice([(25, 0), (26, 30), (7, 75), (24, 30), (13, 60), (31, 15), (99, 0)])
            return Slot("%d:%02d" % (h, m), "%02d:%02d" % (h, m))
        if k == "date":
            mon, day = self.rng.choice([("February", 30), ("February", 31), ("April", 31), ("June", 31),
                                        ("September", 31), ("November", 31), ("March", 32), ("January", 0)])
            yr = (self.today or datetime.date(2026, 1, 1)).year
            return Slot("%s %d, %d" % (mon, day, yr), None, clause="on %s %d, %d" % (mon, day, yr))
        if k == "pattern":
            v = self.pattern_value(p.pattern)
            if not v:
                return None
            bad = "".join(("x" if c.isdigit() else "7" if c.isalpha() else c) for c in v)
            try:
                if bad != v and not re.search(p.pattern, bad):
                    return Slot(bad, bad)
            except re.error:
                return None
        return None


def join_list(items, rng):
    items = list(items)
    if len(items) == 1:
        return items[0]
    sep = rng.choice([", ", ", ", " and "]) if len(items) > 2 else " and "
    last = rng.choice([" and ", ", and ", " & "]) if len(items) > 2 else rng.choice([" and ", " & "])
    return sep.join(items[:-1]) + last + items[-1] if sep != " and " else " and ".join(items)
