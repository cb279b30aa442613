/* spoken_words.c - the words people say numbers, months and weekdays with (spoken_words.h). */
#include "agent/spoken_words.h"

#include <string.h>

const char *const ND_SMALL_NUMBERS[20] = {"zero",    "one",     "two",     "three",     "four",     "five",    "six",
                                          "seven",   "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
                                          "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char *const ND_TENS_WORDS[8] = {"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
const char *const ND_MONTH_NAMES[12] = {"january", "february", "march",     "april",   "may",      "june",
                                        "july",    "august",   "september", "october", "november", "december"};
const char *const ND_WEEKDAY_NAMES[7] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};

int nd_small_number_word(const char *word)
{
    for (int v = 0; v < 20; v++)
        if (!strcmp(ND_SMALL_NUMBERS[v], word)) return v;
    return -1;
}

int nd_tens_word(const char *word)
{
    for (int k = 0; k < 8; k++)
        if (!strcmp(ND_TENS_WORDS[k], word)) return 20 + 10 * k;
    return -1;
}
