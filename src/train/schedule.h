/* schedule.h - the learning-rate schedule of Needle fine-tuning (SPEC 9). */
#ifndef ND_SCHEDULE_H
#define ND_SCHEDULE_H

/* Warmup steps for T total steps: min(max(1, T/20), T-1) (0 when T <= 1). */
int nd_schedule_warmup(int total_steps);

/* Learning rate before optimizer step `step` (0-based) of `total`: linear
 * warmup from 0 over the warmup steps, then cosine from peak to 0 at step T. */
double nd_schedule_lr(double peak, int step, int total);

#endif
