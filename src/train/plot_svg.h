/* plot_svg.h - the loss curves of a training run as a small SVG file. */
#ifndef ND_PLOT_SVG_H
#define ND_PLOT_SVG_H

#include <stdint.h>

#include "needle.h"

/* Write (atomically) a self-contained SVG: the training loss of every step
 * (thin line), its running mean over ~1/50 of the run (thick line) and the
 * validation loss after each epoch (points at val_step[i] steps).  Non-finite
 * values are skipped.  Either series may be empty. */
int nd_plot_loss_svg(const char *path, const float *train, int n_train, const float *val, const int32_t *val_step,
                     int n_val, needle_error *err);

#endif
