/* schedule.c - linear warmup then cosine decay to zero (optax's
 * warmup_cosine_decay_schedule with init 0 and end 0). */
#include "train/schedule.h"

#include <math.h>

int nd_schedule_warmup(int total)
{
    int w = total / 20;
    if (w < 1) w = 1;
    if (w > total - 1) w = total - 1;
    return w < 0 ? 0 : w;
}

double nd_schedule_lr(double peak, int step, int total)
{
    if (total <= 0 || step < 0) return 0.0;
    int w = nd_schedule_warmup(total);
    if (step < w) return peak * (double)step / (double)w;
    if (step >= total) return 0.0;
    double frac = (double)(step - w) / (double)(total - w);
    return peak * 0.5 * (1.0 + cos(M_PI * frac));
}
