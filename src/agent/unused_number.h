/* unused_number.h - a number the request says that no call uses.
 *
 * When a request states a quantity and the answer's calls use none of the
 * numbers it says, the calls do something other than what was asked: the
 * small models dodge a value they cannot write by switching tools ("alert me
 * if my heart rate passes 250", where the alert takes 80-220, answered with
 * get_metric {"metric": "heart_rate"}; "log 5 litres of water" answered with
 * start_workout {"activity": "walking"}), or call the wrong tool with a word of
 * the request ("volume 35" -> play_media {"query": "volume"}).  On 2,200
 * regression rows of the bundled model, such answers were never right.
 *
 * The numbers said: runs of digits (thousands commas and a decimal part
 * allowed) that start a word, except
 *   - parts of clock times, dates, ranges and codes ("7:30", "2026-12-14",
 *     "12/5", "5-10"),
 *   - clock hours ("7 pm", "4.45pm", "1 o'clock", "7h"), ordinals ("14th")
 *     and spans of days, weeks, months or years ("in 3 days", relative
 *     dates the grounding checks read),
 *   - identifiers: digits with letters after them that are not a unit
 *     ("Room 4B", "A1"; "300ml", "68F", "5k" are numbers).
 * Numbers in words are not read (fewer answers doubted).
 *
 * A said number is used when a call's value (a number, or digits inside a
 * string: "Room 4B", "19:00", the phone number copied; or in the tool's name:
 * "do task 17" -> tool_17) equals it, by absolute
 * value, or a unit step away (x60, x1000, x100, x3600 and back: "1.2 litres"
 * = 1200, "2 hours" = 120, "50%" = 0.5), when a clock time "H:MM" in a value
 * is the number written HHMM ("at 1430"), or when it counts the turn's calls
 * ("set 2 alarms").  Heuristics over English text: they doubt, they do not
 * prove. */
#ifndef ND_UNUSED_NUMBER_H
#define ND_UNUSED_NUMBER_H

#include "core/buf.h"
#include "core/json.h"

/* When calls (a JSON array of {name, arguments}, at least one call) use none
 * of the numbers the request says (at least one), writes them as a compact
 * JSON array of strings, as written ("[\"250\"]"), to *out (appended) and
 * returns how many; 0 when some number is used, none is said, or there is no
 * call; -1 when out of memory. */
int nd_numbers_unused(const nd_json *calls, const char *request, nd_buf *out);

/* The numbers a call list holds, at most cap of them in out: its numbers,
 * the digit runs inside its strings (tool names included), and for a clock
 * time "H:MM" also the hour in the other half of the day and the time as
 * HHMM ("19:00": 19, 0, 7, 1900).  Returns how many.  (Also the ask-again
 * sign of a number no call uses, ask_again.h.) */
int nd_call_numbers(const nd_json *calls, double *out, int cap);

#endif
