"""offtopic.py - requests that no declared tool fits (answered with []).

Three sources: requests from other domains (templates with open values, each
tagged with the words of its domain, dropped when a declared tool shares one),
small talk and questions about the assistant, and requests for *foreign tools*
(the 50-tool catalogue of tools/gen_data.py and the examples/ tool sets) that
share no content word with the declared tools, phrased by the same generic
machinery as positive requests.
"""
import glob
import importlib.util
import json
import os
import re

from datagen.schema import Tool, stem

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (template, tags): a template is dropped when a tag stem is among the declared tools' words.
OTHER_DOMAINS = [
    ("set a timer for {n} minutes", "timer countdown"), ("call {name}", "call phone contact dial"),
    ("what's on my calendar {weekday}", "calendar event schedule meeting"),
    ("remind me to call {name} at {time}", "remind reminder task"), ("play some jazz", "play music song media"),
    ("turn on the porch lights", "light lamp bright"), ("navigate to {place}", "navigate direction route map"),
    ("order a large pizza from {business}", "order food pizza delivery"),
    ("book a table for {n} at {business}", "book reservation table restaurant"),
    ("email {name} about {event}", "email mail message"), ("text {name} that I'm on my way", "text message sms"),
    ("what's the weather like in {city}", "weather forecast temperature"),
    ("convert {n} euros to dollars", "convert currency money exchange"),
    ("how many steps did I walk today", "step fitness activity workout health"),
    ("translate good morning into {lang}", "translate language"), ("what's {n} times {m}", "calculat math"),
    ("who won the game last night", "sport score game"), ("what's the capital of {country}", "trivia"),
    ("how do I make banana bread", "recipe cook food"), ("add {product} to my shopping list", "list shopping grocery item add"),
    ("lock the front door", "lock door security"), ("start the vacuum in the {room}", "vacuum clean"),
    ("what's my heart rate", "heart health rate"), ("open the garage", "garage door open"),
    ("take a photo", "camera photo picture"), ("turn up the volume", "volume media sound"),
    ("find a flight to {city}", "flight travel airline"), ("call me an Uber to {place}", "ride taxi uber"),
    ("what time is it in {city}", "time clock zone"), ("show my latest emails", "email mail inbox"),
    ("pay {name} {n} dollars", "pay payment money transfer"), ("what's the stock price of {business}", "stock finance"),
    ("tell me the news", "news headline"), ("read me my notes", "note read"),
    ("set the oven to {n} degrees", "oven temperature cook"), ("water the garden", "garden water sprinkler"),
    ("how far is {city} from {city2}", "distance map direction"), ("spell {word}", "spell dictionary"),
    ("define {word}", "definition dictionary word"), ("what movies are playing tonight", "movie cinema film"),
    ("find a dentist near me", "search find doctor"), ("record a voice memo", "record memo voice audio"),
    ("check my bank balance", "bank balance account money"), ("how much battery do I have", "battery device"),
    ("put the TV on channel {n}", "tv channel media"), ("start a workout", "workout fitness exercise"),
    ("how long will it take to get to {place}", "traffic route direction"),
    ("send an invoice to {business}", "invoice billing send"), ("recommend a podcast", "podcast media"),
    ("write a poem about {noun}", "write poem text"), ("summarise this article for me", "summary text"),
    ("what's the wifi password", "wifi network password"), ("how old is {name}", "age person"),
]
SMALL_TALK = [
    "hi", "hello there", "how are you?", "thanks!", "thank you so much", "what can you do?", "good night",
    "you're awesome", "ok", "never mind", "hmm", "lol", "tell me a joke", "who made you?", "are you a robot?",
    "I'm bored", "what's your name?", "good morning!", "sorry, wrong chat", "can you hear me?", "nothing, forget it",
    "that's all", "I love you", "what's the meaning of life?", "sing me a song", "I'm feeling sad today",
    "do you dream?", "bye", "cool", "wait", "testing, testing", "are you there?", "haha that's funny",
    "what day is it today?", "I had a great weekend", "my cat just knocked over a plant", "brb",
    "let me think about it", "is it going to be a long week?", "who's the best football team?",
]
LANGS = ["French", "Spanish", "Japanese", "Swahili", "German", "Hindi", "Portuguese", "Korean"]


def tool_words(tools):
    words = set()
    for t in tools:
        words |= t.keywords()
    return words


def other_domain_templates(tools):
    words = tool_words(tools)
    return [t for t, tags in OTHER_DOMAINS if not {stem(w) for w in tags.split()} & words]


def fill_other(template, values, rng):
    from datagen.values import WEEKDAYS, EVENTS, NOUNS
    reps = {"n": lambda: str(rng.randint(2, 12)), "m": lambda: str(rng.randint(2, 12)), "name": values.person,
            "weekday": lambda: rng.choice(WEEKDAYS), "time": lambda: values.time_slot(plain=True).text,
            "place": values.place, "business": values.business, "event": lambda: rng.choice(EVENTS),
            "city": values.city, "city2": values.city, "lang": lambda: rng.choice(LANGS),
            "country": lambda: values._call("en_US", "country"), "product": values.product,
            "room": values.room, "word": lambda: values._call("en_US", "word"), "noun": lambda: rng.choice(NOUNS)}
    return re.sub(r"\{(\w+)\}", lambda m: reps[m.group(1)](), template)


def foreign_catalogue():
    """Schemas of tools from elsewhere in this repository (gen_data.py's
    catalogue, examples/*/tools.json, models/tools.json)."""
    out = []
    gd = os.path.join(ROOT, "tools", "gen_data.py")
    if os.path.exists(gd):
        spec = importlib.util.spec_from_file_location("needle_gen_data", gd)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
            out += [mod.tool_schema(t, False) for t in mod.TOOLS]
        except Exception:  # an optional source: the generator works without it
            pass
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*", "tools.json"))) + \
            [os.path.join(ROOT, "models", "tools.json")]:
        try:
            with open(path, encoding="utf-8") as f:
                out += json.load(f)
        except (OSError, ValueError):
            pass
    return out


def foreign_tools(declared_tools):
    """Foreign tools sharing no content word with any declared tool."""
    words = tool_words(declared_tools)
    names = {t.name for t in declared_tools}
    out, seen = [], set()
    for schema in foreign_catalogue():
        try:
            t = Tool(schema)
        except (KeyError, TypeError, AttributeError, StopIteration):
            continue
        if t.name in names or t.name in seen:
            continue
        own = {stem(w) for w in t.tokens} | t.keywords()
        if own & words:
            continue
        seen.add(t.name)
        out.append(t)
    return out
