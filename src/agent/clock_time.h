/* clock_time.h - the clock time a request says, written into the call.
 *
 * The small models convert spoken times badly: "half past seven in the
 * morning" -> "07:00", "quarter to nine in the evening" -> "13:00", "9:40 PM"
 * -> "09:40", "midnight" -> "07:00".  The request says the time exactly, so
 * it is read here and, when the call's time differs, written in its place:
 *
 *   - the times a request says: H:MM and H.MM (with "am"/"pm"/"a.m."/"p.m."
 *     right after, or a cue elsewhere: "in the morning", "afternoon",
 *     "evening", "tonight", "at night"), "5am", "7 pm", "7 o'clock", "seven
 *     thirty", "twelve forty pm", "half past seven", "quarter to nine",
 *     "ten past four", "20 to 6", "noon", "midday", "midnight", and 24-hour
 *     "13:15" (an hour above 12, or 0);
 *   - a 12-hour time needs its half of the day: "am"/"pm" right after it, or
 *     one cue in the request ("morning" -> am; "afternoon", "evening",
 *     "tonight" -> pm; "night" -> pm from 6 to 11, am from 12 to 5); with
 *     two different ones nothing is written, and with none the time is
 *     written as said ("quarter past six" -> 06:15, as "6:15" is) only in
 *     place of a time that is neither half's ("00:00"; 18:15 stays);
 *   - only a turn with one call, when the request says exactly one time and
 *     the call has exactly one string argument of the form HH:MM whose schema
 *     has a `pattern` that accepts the time read (no enum); the time goes in
 *     as HH:MM.
 *
 * English only; other languages are left alone. */
#ifndef ND_CLOCK_TIME_H
#define ND_CLOCK_TIME_H

#include "core/buf.h"
#include "core/json.h"

/* The one clock time `request` says, as minutes after midnight (0..1439), or
 * -1 when it says none, several, or one whose half of the day is unknown. */
int nd_clock_time_said(const char *request);

/* Write that time into the one call's HH:MM argument as described above;
 * the argument's "tool.key" is appended to *paths (a JSON array being built:
 * '[' before the first entry, ',' before the others; *n_paths counts them).
 * Returns 1 when the call changed, 0 when not, -1 when out of memory. */
int nd_fix_clock_time(nd_json *calls, const nd_json *tools, const char *request, nd_buf *paths, int *n_paths);

/* Does the request say a clock time that does not exist: H:MM with an hour
 * above 23 or minutes above 59 ("7:75", "31:15", "13:60"; H.MM only with "at"
 * before it or am/pm after it, never after a currency sign), or "N o'clock"
 * with N above 24?  1 or 0. */
int nd_clock_time_impossible(const char *request);

/* A request to set a time that does not exist asks for a value outside the
 * schema (the behaviour contract's "invalid": no call), whatever valid time
 * the model wrote instead ("7:75" -> "07:07").  In a turn with one call whose
 * one HH:MM argument has a `pattern`, when the request says such a time, its
 * "tool.key" is written to outside[0..outside_size) and 1 returned; else
 * outside is "" and 0 returned.  The calls are not changed. */
int nd_clock_time_outside(nd_json *calls, const nd_json *tools, const char *request, char *outside,
                          size_t outside_size);

#endif
