"""phrasing.py - requests built compositionally from a tool's own words.

A request is an action phrase (verb and object taken from the tool's name and
description) plus one clause per argument (a preposition or frame chosen by
the parameter's kind and name), then dressed: fillers, politeness, indirect
frames, chit-chat around it, typos outside the values, clause order, casing.
Nothing here names a particular tool.
"""
import re

from datagen.schema import humanize

VERB_SYNONYMS = {
    "set": ["set", "change", "adjust"], "get": ["get", "check", "show me", "look up", "pull up"],
    "send": ["send", "shoot off", "fire off", "send out"], "play": ["play", "put on", "start playing", "queue up"],
    "create": ["create", "make", "add", "set up"], "add": ["add", "put", "save", "log"],
    "delete": ["delete", "remove", "get rid of", "cancel"], "remove": ["remove", "delete", "take off", "drop"],
    "start": ["start", "begin", "kick off"], "stop": ["stop", "end", "halt"], "search": ["search for", "find", "look up"],
    "find": ["find", "look up", "search for"], "log": ["log", "record", "track", "note down"],
    "record": ["record", "log", "note"], "book": ["book", "reserve"], "call": ["call", "ring", "phone"],
    "open": ["open", "launch", "bring up"], "schedule": ["schedule", "book", "set up", "arrange"],
    "save": ["save", "store", "keep"], "update": ["update", "change", "edit"], "show": ["show", "display", "pull up"],
    "read": ["read", "read out"], "track": ["track", "log", "record"], "order": ["order", "buy", "get"],
    "buy": ["buy", "order", "purchase"], "extract": ["save", "record", "file", "capture"],
    "share": ["share", "send"], "measure": ["measure", "take", "check"], "check": ["check", "look at", "get"],
    "list": ["list", "show", "show me"], "cancel": ["cancel", "call off"], "pause": ["pause", "hold"],
    "resume": ["resume", "continue", "unpause"], "lock": ["lock", "secure"], "unlock": ["unlock", "open"],
    "turn": ["turn"], "toggle": ["toggle", "switch"], "enable": ["enable", "turn on", "activate"],
    "disable": ["disable", "turn off", "deactivate"], "navigate": ["navigate", "get directions"],
    "translate": ["translate"], "convert": ["convert"], "make": ["make", "create"], "write": ["write", "jot down"],
    "note": ["note", "jot down"], "remind": ["remind"], "start_timer": ["start"], "increase": ["increase", "raise"],
    "decrease": ["decrease", "lower"], "mute": ["mute", "silence"], "skip": ["skip"], "cast": ["cast", "stream"],
    "adjust": ["adjust", "change", "set"], "control": ["control"], "take": ["take", "snap"], "request": ["request", "ask for"], "submit": ["submit", "send in"],
}
UNDOABLE = {"lock", "mute", "block", "pause", "hide", "pin", "archive", "follow", "plug", "link", "mask", "pair",
            "mount", "freeze", "silence"}
PREPOSITIONS = {"to", "from", "in", "into", "on", "onto", "for", "of", "with"}
QUESTION_VERBS = {"get", "check", "show", "read", "list", "find", "search", "measure"}
ONOFF_NAMES = re.compile(r"^(on|is on|enabled?|power|powered|active|state|turned on|switch|is enabled|activate)$")
ON_LEADS = ["turn on", "switch on", "power on", "turn {obj} on", "switch {obj} on"]
OFF_LEADS = ["turn off", "switch off", "shut off", "turn {obj} off", "switch {obj} off", "kill"]
PREFIXES = ["", "", "", "", "", "please ", "can you ", "could you ", "could you please ", "would you ", "hey, ",
            "hey assistant, ", "ok ", "okay so ", "um, ", "uh ", "hi! ", "quick one: ", "go ahead and ",
            "I need you to ", "I'd like you to ", "can you please ", "pls ", "yo, ", "when you get a chance, ",
            "right, ", "alright, ", "so, ", "oh and ", "hmm, ", "kindly ", "hey there, can you ", "yes, "]
SUFFIXES = ["", "", "", "", " please", " thanks", ", thank you", " pls", ", cheers", " for me", " asap", " now",
            "!", ".", "?", " thx", " if you can", " real quick", ", ty", " please and thank you", ", would you?"]
INDIRECT = ["I want to {vp}", "I'd like to {vp}", "I need to {vp}", "is it possible to {vp}?",
            "I was wondering if you could {vp}", "help me {vp}", "let's {vp}", "time to {vp}",
            "don't forget to {vp}", "make sure to {vp}", "it'd be great if you could {vp}",
            "would it be possible to {vp}?", "just {vp}", "I'd love it if you could {vp}", "you can {vp} now",
            "go on and {vp}", "can I get you to {vp}?", "do me a favour and {vp}", "I think we should {vp}",
            "{vp}, don't forget", "{vp}, if you don't mind", "{vp} when you can"]
CHAT_BEFORE = ["Long day.", "Morning!", "Ugh, Mondays.", "Okay, next thing.", "I'm heading out soon.",
               "Good evening.", "Hope you're doing well.", "Thanks for earlier.", "Busy day today.", "Quick favour.",
               "So tired right now.", "Back from the gym.", "Just got home.", "Hi again.", "Right then.",
               "Sorry to bother you.", "Oh, one more thing.", "Alright, listen."]
CHAT_AFTER = ["Thanks a lot!", "You're the best.", "Appreciate it.", "Cheers.", "That's all for now.",
              "Have a good one.", "Thanks, buddy.", "Much appreciated."]
NEGATIONS = ["don't {vp}", "do not {vp}", "please don't {vp}", "never mind, don't {vp}", "I don't want you to {vp}",
             "no need to {vp}", "there's no need to {vp}", "you don't need to {vp}", "don't bother to {vp}",
             "stop, don't {vp}", "cancel that, do not {vp}", "hold off, don't {vp} yet", "I said don't {vp}",
             "{vp}... actually no, don't", "{vp}. wait, never mind", "forget it, don't {vp}", "please do not {vp}",
             "we don't need to {vp}", "I changed my mind, don't {vp}", "dont {vp}", "don't {vp} please",
             "do NOT {vp}", "whatever you do, don't {vp}", "no, don't {vp}", "better not {vp}",
             "I didn't ask you to {vp}", "you shouldn't {vp}", "let's not {vp}", "skip it, don't {vp}",
             "don't you dare {vp}", "{vp}? no, don't do that"]
# How people ask to send a message to someone ("text Mom that I'm late", "tell Ana the keys are under
# the mat"): used for any tool whose request carries just a recipient and a message text.
MESSAGE_FRAMES = ["text {to} that {m}", "text {to} {m}", "text {to}: {m}", "text {to} saying {m}",
                  "message {to}: {m}", "message {to} saying {m}", "message {to} that {m}", "msg {to}: {m}",
                  "msg {to} saying {m}", "txt {to} {m}", "tell {to} {m}", "tell {to} that {m}",
                  "let {to} know {m}", "let {to} know that {m}", "write to {to}: {m}", "ping {to}: {m}",
                  "send {to} a message saying {m}", "send {to} a text: {m}", "send {to} a text saying {m}",
                  "drop {to} a line saying {m}", "text {to} '{m}'", "message {to} \"{m}\"",
                  "send a text to {to} - {m}", "send a message to {to}: {m}", "get word to {to} that {m}"]
# The same verbs without the text (a "missing" request when the text is required).
MESSAGE_FRAMES_NO_TEXT = ["text {to}", "message {to}", "msg {to}", "send {to} a message", "send {to} a text",
                          "send a text to {to}", "write to {to}", "drop {to} a line", "ping {to}"]
CONNECTORS = [" and ", ", and ", ", then ", ". Also ", ". Then ", " and also ", "; ", ", plus ", " and after that ",
              ", and then ", ". And ", " & ", ", also "]


def split_description(desc):
    """The description's first clause as (verb, rest), when it reads as an action."""
    first = re.split(r"[.;,(]|\s+-\s+", desc.strip())[0].strip()
    if not first or re.search(r"\b(on or off|or)\b", first):
        first = re.split(r"\s+or\s+", first)[0].strip()
        if re.search(r"\bon$|\boff$", first):
            return None
    words = first.split()
    if len(words) < 2 or len(words) > 9:
        return None
    verb = words[0].lower()
    if verb in ("turn", "toggle", "enable", "disable"):
        return None
    if verb not in VERB_SYNONYMS and not (words[1].lower() in OBJECT_STARTS and base_verb(verb)):
        return None
    obj = " ".join(words[1:])
    obj = re.split(r"\s+(?:to|into)\s+an?\b", obj)[0]  # "the radio to an FM frequency": a value says which
    return verb, obj[0].lower() + obj[1:]


# Verbs whose object is a person ("call Ana", "ring my sister Aoife"): the name follows the verb.
PERSON_VERBS = {"call", "phone", "ring", "dial", "email", "invite", "contact", "remind", "page"}
# Words that start the object of an imperative description ("Preheat the oven", "Phone someone").
OBJECT_STARTS = {"the", "a", "an", "my", "your", "this", "that", "these", "those", "some", "someone", "somebody",
                 "something", "all", "up", "down", "out", "off"}


def base_verb(word):
    """True when word is a verb in its base form ("preheat", "phone", "tune"), so a description
    starting with it reads as a command. The description's own verb is what people say."""
    from lemminflect import getAllLemmas  # a development dependency of the generator, like faker
    lemmas = getAllLemmas(word).get("VERB")
    return bool(lemmas) and lemmas[0] == word


class ToolPhrasing:
    """Everything needed to say requests for one tool."""

    def __init__(self, tool):
        self.tool = tool
        toks = tool.tokens
        d = split_description(tool.desc)
        # the name's first word is the verb when it is a known one or the description's own verb
        # ("tune_radio", "Tune the radio ...")
        self.verb = toks[0] if toks and (toks[0] in VERB_SYNONYMS or (d and d[0] == toks[0])) else None
        obj_toks = toks[1:] if self.verb else toks
        if obj_toks and all(w in PREPOSITIONS for w in obj_toks):  # "navigate_to": the verb alone
            obj_toks = []
        self.noun = " ".join(obj_toks) or (d[1].split()[-1] if d else
                                           tool.desc.split()[1] if len(tool.desc.split()) > 1 else tool.name)
        self.objects = []
        if obj_toks:
            self.objects.append(("the " if self.verb != "create" else "a ") + self.noun)
            self.objects.append(("my " if self.verb in QUESTION_VERBS else "the ") + self.noun)
        elif self.verb and toks[1:]:
            self.objects.append("")  # "navigate" + "to Rumia"
        # "open" means launch for an app, but a window or a door that also closes is opened
        self.synonyms = ["open"] if self.verb == "open" and re.search(r"\bclose", tool.desc, re.I) else None
        if d and re.search(r"\b(some|given|specified|threshold|the user|a certain)\b", d[1]):
            d = None  # "log water the user drank" is a description, not a request
        self.desc_phrase = None
        if d:
            self.desc_phrase = d
            if not self.verb:
                self.verb = d[0]
            if d[0] == self.verb or not self.objects:
                self.objects.append(d[1])
        if not self.verb:
            self.verb = "use"
        if not self.objects:
            self.objects = ["the " + self.noun]
        if self.desc_phrase and re.search(r"\b(some|given|specified|threshold|the user|a certain)\b", self.desc_phrase[1]):
            self.desc_phrase = None
        self.onoff = next((p for p in tool.params if p.kind == "bool" and ONOFF_NAMES.match(p.human)), None)
        # "locked" with lock_door: true -> "lock", false -> "unlock"
        self.verb_bool = next((p for p in tool.params if p.kind == "bool" and self.verb in UNDOABLE and
                               p.human in (self.verb + "ed", self.verb + "d", "is " + self.verb + "ed")), None)
        # an enum naming the object ("door": front/back -> "the front door")
        last = self.noun.split()[-1] if self.noun else ""
        self.object_enum = next((p for p in tool.params if p.kind == "enum" and p.human == last), None)
        # an enum of actions ("action": pause/resume/next) is the verb itself
        self.action_enum = next((p for p in tool.params if p.kind == "enum" and p.required and
                                 re.search(r"^(action|command|operation|op)$", p.human)), None)
        # a form: several free-text fields (a contact, an expense, an event)
        self.record_like = sum(1 for p in tool.params if p.type == "string" and not p.enum) >= 3
        # add_to_playlist: "add X to (my) PLAYLIST"
        self.prep = None
        if len(obj_toks) >= 2 and obj_toks[0] in PREPOSITIONS:
            self.prep = obj_toks[0]
            self.noun = " ".join(obj_toks[1:])
            self.objects = ["the " + self.noun]

        # enum values no other tool of the set has (lower case): set by distinct_values(); a request
        # may say only these and still name this tool
        self.distinct = set()

    def verb_phrase(self, rng):
        return rng.choice(self.synonyms or VERB_SYNONYMS.get(self.verb, [self.verb.replace("_", " ")]))


UNIT_WORDS = {"ml", "minutes", "mins", "min", "seconds", "secs", "sec", "hours", "hrs", "bpm", "kg", "km", "lbs", "pct",
              "percent", "usd", "eur", "c", "f", "celsius", "fahrenheit", "ms", "cm", "mm", "m", "g", "in", "s"}
# Names that say nothing about the value: never "query Blue Train", "value 5".
BLAND_NAMES = {"query", "q", "text", "value", "input", "data", "content", "item", "arg", "param", "string", "body",
               "time", "date", "when", "name", "term", "keyword", "keywords", "search", "prompt"}


def spoken_name(p):
    """The parameter's name as said before a value: "amount_ml" -> "amount" (the unit is in the value)."""
    words = p.human.split()
    kept = [w for w in words if w not in UNIT_WORDS]
    return " ".join(kept) if kept else p.human


def clause_options(p, slot, tool, many_numbers):
    t, h = slot.text, spoken_name(p)
    k = p.kind
    if slot.clause:
        return [slot.clause]
    opts = _clause_options(p, slot, tool, many_numbers, t, h, k)
    unit_named = all(w in UNIT_WORDS for w in p.human.split())
    if p.human in BLAND_NAMES or h in BLAND_NAMES or unit_named:
        opts = [o for o in opts if not re.match(r"^(with |the |in |set to |for )?(%s)\b" % re.escape(h), o)] or [t]
    if unit_named:  # "percent": never "25 percent percent"
        opts = [o for o in opts if not re.search(r"\b%s\b" % re.escape(h), o.replace(t, ""))] or [t]
    return opts


def _clause_options(p, slot, tool, many_numbers, t, h, k):
    if k == "room":
        the = "" if "'s " in t else "the "
        return ["in " + the + t, "in " + the + t, "for " + the + t, h + " " + t if h != "room" else "in " + the + t]
    if k == "language":
        return ["into " + t, "to " + t, "in " + t, h + " " + t]
    if k == "city":
        return ["in " + t, "for " + t, h + " " + t]
    if k == "place":
        if re.search(r"dest|^to\b|arriv", h):
            return ["to " + t, "going to " + t]
        if re.search(r"origin|from|depart|start", h):
            return ["from " + t, "leaving from " + t]
        return ["in " + t, "for " + t, "in " + t, h + " " + t]
    if k == "address":
        return ["at " + t, h + " " + t, h + ": " + t]
    if k == "person":
        if re.search(r"recipient|^to$|contact", h):
            return ["to " + t, "to " + t, "for " + t]
        if re.search(r"sender|^from$", h):
            return ["from " + t]
        if re.search(r"attendee|participant|guest|with|invite", h):
            return ["with " + t, "and invite " + t]
        if re.search(r"assign|owner", h):
            return ["for " + t, "assigned to " + t]
        return ["for " + t, "named " + t, h + " " + t, "called " + t, h + ": " + t]
    if k == "artist":
        return ["by " + t, "from " + t, h + " " + t]
    if k == "message":
        return ["saying " + t, 'saying "' + t + '"', "that says " + t, ": " + t, "with the " + h + ' "' + t + '"',
                ': "' + t + '"', "- " + t]
    if k == "media":
        return [t, '"' + t + '"', h + " " + t, "the " + h + " " + t]
    if k == "product":
        return [t, h + " " + t, "some " + t]
    if k == "business":
        return ["at " + t, "from " + t, h + " " + t]
    if k == "query":
        return ["for " + t, "about " + t, '"' + t + '"']
    if k in ("title", "words"):
        return ["called " + t, '"' + t + '"', h + " " + t, "named " + t, "for " + t, h + ": " + t, 'titled "' + t + '"']
    if k == "email":
        return ["at " + t, h + " " + t, "email " + t]
    if k == "phone":
        return ["at " + t, h + " " + t, "number " + t, "on " + t]
    if k in ("url", "pattern", "hostname", "ipv4", "uuid"):
        return [h + " " + t, h + ": " + t, t]
    if k == "identifier":
        return [h + " " + t, h + ": " + t, h + " #" + t if not t.startswith("#") else h + " " + t, t, "for " + t]
    if k == "time":
        return ["at " + t, "at " + t, "for " + t, h + " " + t]
    if k in ("date", "datetime"):
        return ["on " + t, "for " + t]
    if k == "temperature":
        return (["to " + t] if not many_numbers else []) + ["at " + t, h + " " + t, h + " to " + t]
    if k == "percent":
        return (["to " + t] if not many_numbers else []) + ["at " + t, h + " " + t, h + " to " + t, t + " " + h]
    if k == "duration":
        return ["for " + t, h + " " + t, "lasting " + t] if "for" not in h else [h + " " + t, "for " + t]
    if k == "money":
        return ["for " + t, "of " + t, h + " " + t]
    if k == "count":
        return [h + " " + t, t + " " + h, "for " + t + " " + h, h + ": " + t]
    if k == "number":
        return [h + " " + t, h + " to " + t, h + ": " + t, "with " + h + " " + t] + (["to " + t] if not many_numbers else [])
    if k == "enum":
        opts = [h + " " + t, h + " to " + t, t + " " + h, "in " + t + " " + h, "with " + h + " " + t]
        if re.search(r"colou?r|mode|type|kind|style|level|speed|size|genre|category|priority|action|direction|"
                     r"period|range|when|frequency|day|metric|activity|sport", h):
            opts += [t, t, "in " + t, "on " + t] if re.search(r"colou?r|mode", h) else [t]
        return opts
    if k == "array":
        if re.match(r"(avoid|exclude|skip|ignore|block|without)\b", h):  # never "for ferries" for avoid
            return [h + " " + t, h + ": " + t, "without " + t] + (["avoiding " + t, "no " + t] if h == "avoid" else [])
        return [h + " " + t, "with " + t, "for " + t, h + ": " + t]
    if k == "bool":
        return (["with " + h, h + " on", "and turn " + h + " on", h + ": yes", "with " + h + " enabled"]
                if slot.value else ["without " + h, h + " off", "with " + h + " disabled", h + ": no", "no " + h])
    return [h + " " + t]


# Share of requests (where a value names the tool) said with the values alone, without the tool's
# nouns or its parameters' names.
BARE_SHARE = 0.3


def distinct_values(phrasings):
    """Mark in each ToolPhrasing the enum values (as said, lower case) that no other tool in phrasings has."""
    said = {}
    for ph in phrasings:
        for p in ph.tool.params:
            for e in (p.enum or []) if p.kind == "enum" else []:
                if isinstance(e, str):
                    for t in {e.lower(), e.lower().replace("_", " ")}:
                        said.setdefault(t, set()).add(ph.tool.name)
    for ph in phrasings:
        ph.distinct = {t for t, owners in said.items() if owners == {ph.tool.name}}


def ing_verb(word):
    """An -ing value as its verb ("running" -> "run", "cycling" -> "cycle"), or None. People say
    "start a run" for activity "running"."""
    if not re.fullmatch(r"[a-z]{3,}ing", word):
        return None
    from lemminflect import getLemma  # a development dependency of the generator, like faker
    lemma = getLemma(word, upos="VERB")
    return lemma[0] if lemma and lemma[0] != word else None


def implied_by_another(p, s, chosen):
    """True when another slot's words already imply p's argument ("68°F" gives the unit too)."""
    return any(p.name in o.extra for _, o in chosen if o is not s)


def bare_command(ph, chosen, rng, question_ok):
    """A request that says the values and a verb but neither the tool's nouns nor its parameters'
    names: "start yoga for 20 minutes", "track my swim", "steps today?". A model that only ever saw
    "start tracking a workout activity yoga" learns to wait for the tool's own words, which people
    rarely say. Returns (text, protected, light)."""
    named, clauses, protected = [], [], []
    n_numbers = sum(1 for p, _ in chosen if p.type in ("integer", "number"))
    asks = ph.verb in QUESTION_VERBS
    for p, s in chosen:
        if p.kind == "enum" and s.text and not s.clause:
            t = s.text
            verb = ing_verb(t.lower())
            protected.append(t)
            if verb and rng.random() < 0.5:
                protected.append(verb)
                t = rng.choice(["a ", "my ", ""]) + verb
            elif asks and not named and rng.random() < 0.5:
                t = "my " + t
            named.append(t)
            continue
        if implied_by_another(p, s, chosen):
            continue
        opts = clause_options(p, s, ph.tool, n_numbers > 1)
        bare = [o for o in opts if not re.search(r"\b%s\b" % re.escape(spoken_name(p)), o)]
        clauses.append(rng.choice(bare or opts))
        if s.text:
            protected.append(s.text)
    rng.shuffle(clauses)
    body = " ".join(named + clauses)
    if asks and question_ok and rng.random() < 0.5:
        return rng.choice(["what's ", "what is ", "tell me ", "show me ", "", "how about "]) + body + \
            rng.choice(["", "?", "?", " please"]), protected, True
    return ph.verb_phrase(rng) + " " + body, protected, False


def passage(ph, chosen, rng):
    """A record to extract: labelled lines, a bare card, or one line, after or
    before an instruction ("save this contact:")."""
    items = [(p, s) for p, s in chosen if s.text and not s.clause and p.kind not in ("bool",)]
    rest = [(p, s) for p, s in chosen if (p, s) not in items]
    style = rng.random()
    if style < 0.4:
        lines = ["%s: %s" % (p.human.capitalize(), s.text) for p, s in items]
    elif style < 0.7:
        lines = [s.text for _, s in items]
    else:
        lines = ["%s %s" % (p.human, s.text) for p, s in items]
    sep = rng.choice(["\n", "\n", ", ", " | ", "; "])
    body = sep.join(lines)
    extra = " ".join(rng.choice(clause_options(p, s, ph.tool, False)) for p, s in rest)
    instr = ph.verb_phrase(rng) + " " + rng.choice(["this", "the following", "these details as"]) + " " + \
        ph.noun + (" " + extra if extra else "")
    text = instr + ":" + ("\n" if "\n" in sep else " ") + body if rng.random() < 0.6 else \
        body + ("\n" if "\n" in sep else " - ") + instr
    return text, [s.text for _, s in chosen if s.text]


def room_object(ph, room, rng, share, protected, skip):
    """At the given share, the room said inside the object ("the kitchen lights", "Ana's office
    blinds"), its argument then said; None otherwise."""
    if not room or rng.random() >= share:
        return None
    protected.append(room[1].text)
    skip.add(room[0].name)
    return ("" if "'s " in room[1].text else "the ") + room[1].text + " " + ph.noun


def command(ph, chosen, rng, question_ok=True):
    """An imperative request for one call. chosen: [(param, slot)] in the
    tool's order. Returns (text, protected texts). The text starts with a verb
    (or a clause moved to the front) so frames can wrap it."""
    tool = ph.tool
    if ph.record_like and len(chosen) >= 3 and rng.random() < 0.4:
        text, protected = passage(ph, chosen, rng)
        return text, protected, True
    obj = rng.choice(ph.objects)
    clauses, protected = [], []
    n_numbers = sum(1 for p, _ in chosen if p.type in ("integer", "number"))
    lead = None
    onoff_slot = None
    for p, s in chosen:
        if ph.onoff is not None and p is ph.onoff:
            onoff_slot = s
    room = next(((p, s) for p, s in chosen if p.kind == "room" and not s.clause), None)
    skip = set()
    light = False
    oenum = next(((p, s) for p, s in chosen if ph.object_enum is not None and p is ph.object_enum), None)
    if oenum and rng.random() < 0.85:
        obj = "the " + oenum[1].text + " " + ph.noun
        protected.append(oenum[1].text)
        skip.add(oenum[0].name)
    vb = next(((p, s) for p, s in chosen if ph.verb_bool is not None and p is ph.verb_bool), None)
    direct = next(((p, s) for p, s in chosen if p.required and (p.kind in ("media", "product") or (
        p.kind == "person" and ph.verb in PERSON_VERBS and not s.clause))), None)
    direct_text = None
    if direct is not None:
        kind_enum = next(((p, s) for p, s in chosen if p.kind == "enum" and
                          re.search(r"^(type|kind|category|media type)$", p.human)), None)
        quoted = direct[0].kind != "person" and rng.random() >= 0.7
        direct_text = '"' + direct[1].text + '"' if quoted else direct[1].text
        if kind_enum and rng.random() < 0.7:
            direct_text = rng.choice(["the ", "a ", ""]) + kind_enum[1].text + " " + direct_text
            protected.append(kind_enum[1].text)
            direct_skip = {direct[0].name, kind_enum[0].name}
        else:
            direct_skip = {direct[0].name}
        protected.append(direct[1].text)
    act = next(((p, s) for p, s in chosen if ph.action_enum is not None and p is ph.action_enum), None)
    framed = message_frame(ph, chosen, rng)
    if framed is not None:
        return framed[0], framed[1], False
    anchored = next(((p, s) for p, s in chosen if s.lead), None)  # a value said as the verb: "close"
    if onoff_slot is None and vb is None and act is None and anchored is None and direct is None and not ph.prep and \
            any(p.kind == "enum" and s.text.lower() in ph.distinct for p, s in chosen) and rng.random() < BARE_SHARE:
        return bare_command(ph, chosen, rng, question_ok)
    if onoff_slot is not None:
        leads = ON_LEADS if onoff_slot.value else OFF_LEADS
        lead = rng.choice(leads)
        skip.add(ph.onoff.name)
        obj = room_object(ph, room, rng, 0.5, protected, skip) or obj
        lead = lead.replace("{obj}", obj) if "{obj}" in lead else lead + " " + obj
    elif vb is not None:
        skip.add(vb[0].name)
        verb = ph.verb_phrase(rng) if vb[1].value else "un" + ph.verb
        lead = verb + " " + obj
    elif act is not None:
        skip.add(act[0].name)
        v = act[1].text
        protected.append(v)
        lead = rng.choice([v, v + " the " + ph.noun, v + " " + ph.noun, ph.noun + " " + v, v + " it"])
    elif anchored is not None and not ph.prep:
        skip.add(anchored[0].name)
        verb, adverb = anchored[1].lead
        obj = room_object(ph, room, rng, 0.3, protected, skip) or obj
        lead = verb + " " + obj
        if adverb:  # "fully open the window", "open the window fully", "... all the way"
            lead = rng.choice([adverb + " " + lead, lead + " " + adverb, lead + " all the way"])
        protected += [verb] + adverb.split()
    elif ph.prep:
        lead = ph.verb_phrase(rng)
    elif direct is not None and rng.random() < 0.6:
        lead = ph.verb_phrase(rng) + " " + direct_text
        skip |= direct_skip
    else:
        verb = ph.verb_phrase(rng)
        obj = room_object(ph, room, rng, 0.3, protected, skip) or obj
        if ph.desc_phrase and rng.random() < 0.25 and not skip:  # (skip: a value already lives in obj)
            verb, obj = ph.desc_phrase[0], ph.desc_phrase[1]
            verb = rng.choice(VERB_SYNONYMS.get(verb, [verb]))
        lead = verb + " " + obj
        if ph.verb in QUESTION_VERBS and question_ok and rng.random() < 0.3:
            lead = rng.choice(["what's " + obj, "what is " + obj, "how's " + obj, "tell me " + obj, "show " + obj])
            light = True
        elif rng.random() < 0.05 and obj.startswith(("the ", "a ", "an ", "my ")):
            lead = obj.split(" ", 1)[-1]  # telegraphic: "alarm at 7", "kitchen lights off"
            light = True
    tail = []
    for p, s in chosen:
        if p.name in skip or implied_by_another(p, s, chosen):
            continue
        opts = clause_options(p, s, tool, n_numbers > 1)
        if ph.prep and p.human == ph.noun:
            opts = [ph.prep + " " + s.text, ph.prep + " my " + s.text + " " + ph.noun, ph.prep + " the " + ph.noun + " " +
                    s.text, ph.prep + " the " + s.text + " " + ph.noun]
            protected.append(s.text)
            tail.append(rng.choice(opts))
            continue
        if ph.prep and p.kind == "media":
            opts = [s.text, '"' + s.text + '"', "the " + p.human + " " + s.text]
        if re.search(r"\b%s\b" % re.escape(p.human), lead):
            opts = [o for o in opts if not o.startswith(p.human)] or opts
        text = rng.choice(opts)
        if s.text:
            protected.append(s.text)
        (tail if p.kind in ("message",) else clauses).append(text)
    rng.shuffle(clauses)
    parts = clauses + sorted(tail, key=lambda c: not c.startswith(("to ", "into ", "on ", "in ")))[::-1] \
        if ph.prep else clauses + tail
    body = lead
    for i, c in enumerate(parts):
        if c.startswith(": ") or c.startswith("- "):
            body += c if c.startswith(":") else " " + c
        elif i and i < len(clauses) and rng.random() < 0.2 and not c.startswith(("and ", "with")):
            body += rng.choice([", ", " and "]) + c if not c.startswith(("to ", "in ", "at ", "on ", "for ")) \
                else ", " + c
        else:
            body += " " + c
    if clauses and rng.random() < 0.12 and not lead.startswith(("what", "how", "tell", "show")):
        first = clauses[0]
        if " " + first in body and first.startswith(("in ", "at ", "on ", "for ", "to ", "every ", "tomorrow",
                                                      "today", "this ", "next ")):
            body = first[0].upper() + first[1:] + ", " + body.replace(" " + first, "", 1)
            light = True
    return re.sub(r" {2,}", " ", body).strip(), protected, light


def message_frame(ph, chosen, rng):
    """(text, protected) in a messaging verb's own frame, for a request that says only a recipient
    and (maybe) a message text; None when the tool or the arguments do not fit or by chance."""
    if not (ph.verb in ("send", "write") or re.search(r"message|\btext\b|sms|chat", ph.noun)):
        return None
    to = next(((p, s) for p, s in chosen if p.kind == "person" and not s.clause and
               re.search(r"recipient|^to$|contact", spoken_name(p))), None)
    msg = next(((p, s) for p, s in chosen if p.kind == "message" and not s.clause), None)
    if to is None or len(chosen) != (2 if msg else 1) or rng.random() < 0.45:
        return None
    if msg is None:
        return rng.choice(MESSAGE_FRAMES_NO_TEXT).format(to=to[1].text), [to[1].text]
    m = msg[1].text
    return rng.choice(MESSAGE_FRAMES).format(to=to[1].text, m=m), [to[1].text, m]


# The share of requests typed bare, with no filler before or after: people often type just the command,
# and with fillers on ~97% of rows the model took a short request for one that lacks a value.
BARE_RATE = 0.25
LIGHT_PREFIXES = ["", "", "", "hey, ", "um, ", "ok, ", "hmm, ", "so ", "oh, ", "right, ", "quick question: "]
QUESTION_START = re.compile(r"^(what|who|how|when|where|is|are|do|does|can|could|would|will|why|which)\b", re.I)


def dress(text, rng, protected, indirect=True, chat=True, typos=True, light=False):
    """light: the text is already a frame (a negation, a question, a fronted
    clause): only light fillers go before it."""
    r = rng.random()
    light = light or bool(QUESTION_START.match(text)) or text[:1].isupper()
    if rng.random() < BARE_RATE:
        # typed as a bare command ("text Maya hello there"): no filler, no chit-chat
        chat = False
    elif indirect and not light and r < 0.22:
        text = rng.choice(INDIRECT).replace("{vp}", text)
    else:
        text = rng.choice(LIGHT_PREFIXES if light else PREFIXES) + text + rng.choice(SUFFIXES)
    if chat and rng.random() < 0.12:
        text = rng.choice(CHAT_BEFORE) + " " + text[0].upper() + text[1:] if not starts_with_value(text, protected) \
            else rng.choice(CHAT_BEFORE) + " " + text
    if chat and rng.random() < 0.06:
        text = text.rstrip() + (". " if text[-1:].isalnum() else " ") + rng.choice(CHAT_AFTER)
    if typos and rng.random() < 0.15:
        text = typo(text, rng, protected)
    if rng.random() < 0.15:
        text = lower_outside(text, protected)
    elif rng.random() < 0.5 and text[:1].islower() and not starts_with_value(text, protected):
        text = text[0].upper() + text[1:]
    return text


def starts_with_value(text, protected):
    return any(v and text.startswith(v) for v in protected)


def spans(text, protected):
    out = []
    low = text.lower()
    for v in protected:
        if not v:
            continue
        i = low.find(v.lower())
        if i >= 0:
            out.append((i, i + len(v)))
    return out


def typo(text, rng, protected):
    """One typo in a word of 4+ letters that is no part of a value."""
    sp = spans(text, protected)
    words = [m for m in re.finditer(r"[A-Za-z]{4,}", text)
             if not any(a < m.end() and m.start() < b for a, b in sp)
             and m.group(0).lower() not in ("dont", "never", "stop", "cancel", "mind", "actually")]
    if not words:
        return text
    m = rng.choice(words)
    w = m.group(0)
    i = rng.randrange(1, len(w) - 1)
    kind = rng.random()
    if kind < 0.4:
        w2 = w[:i] + w[i + 1] + w[i] + w[i + 2:]
    elif kind < 0.7:
        w2 = w[:i] + w[i + 1:]
    else:
        w2 = w[:i] + w[i] + w[i:]
    return text[:m.start()] + w2 + text[m.end():]


def lower_outside(text, protected):
    sp = spans(text, protected)
    return "".join(c if any(a <= i < b for a, b in sp) else c.lower() for i, c in enumerate(text))


def negate(cmd, rng):
    return rng.choice(NEGATIONS).replace("{vp}", cmd)


def join_commands(cmds, rng):
    text = cmds[0]
    for c in cmds[1:]:
        con = rng.choice(CONNECTORS)
        if con.startswith("."):
            c = c[0].upper() + c[1:] if c[:1].islower() else c
        text += con + c
    return text


def human(name):
    return humanize(name)
