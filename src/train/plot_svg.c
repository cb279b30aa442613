/* plot_svg.c - a dependency-free line plot: axes, ticks, two series. */
#include "train/plot_svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/file.h"

enum { W = 640, H = 400, LEFT = 60, RIGHT = 20, TOP = 30, BOTTOM = 45 };

typedef struct frame {
    double x0, x1, y0, y1; /* data range */
} frame;

static double px(const frame *f, double x) { return LEFT + (x - f->x0) / (f->x1 - f->x0) * (W - LEFT - RIGHT); }
static double py(const frame *f, double y) { return H - BOTTOM - (y - f->y0) / (f->y1 - f->y0) * (H - TOP - BOTTOM); }

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks. */
static double tick_step(double span, int n)
{
    double raw = span / n, p = pow(10.0, floor(log10(raw))), r = raw / p;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * p;
}

static void polyline(nd_buf *b, const frame *f, const float *y, int n, int window, const char *style)
{
    nd_buf_printf(b, "<polyline fill=\"none\" %s points=\"", style);
    double sum = 0;
    int in_sum = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(y[i])) continue;
        double v = y[i];
        if (window > 1) { /* running mean over the last `window` finite values */
            sum += v;
            in_sum++;
            if (i >= window && isfinite(y[i - window])) { sum -= y[i - window]; in_sum--; }
            v = sum / in_sum;
        }
        nd_buf_printf(b, "%.1f,%.1f ", px(f, i + 1), py(f, v));
    }
    nd_buf_puts(b, "\"/>\n");
}

int nd_plot_loss_svg(const char *path, const float *train, int n_train, const float *val, const int32_t *val_step,
                     int n_val, needle_error *err)
{
    frame f = {0, n_train > 1 ? n_train : 1, INFINITY, -INFINITY};
    for (int i = 0; i < n_train; i++)
        if (isfinite(train[i])) { f.y0 = fmin(f.y0, train[i]); f.y1 = fmax(f.y1, train[i]); }
    for (int i = 0; i < n_val; i++) {
        if (isfinite(val[i])) { f.y0 = fmin(f.y0, val[i]); f.y1 = fmax(f.y1, val[i]); }
        if (val_step[i] > f.x1) f.x1 = val_step[i];
    }
    if (!(f.y0 <= f.y1)) { f.y0 = 0; f.y1 = 1; } /* nothing finite to show */
    if (f.y1 - f.y0 < 1e-6) { f.y0 -= 0.5; f.y1 += 0.5; }
    double pad = 0.05 * (f.y1 - f.y0);
    f.y0 = f.y0 - pad > 0 || f.y0 < 0 ? f.y0 - pad : 0;
    f.y1 += pad;

    nd_buf b;
    nd_buf_init(&b);
    nd_buf_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n", W, H, W, H);
    nd_buf_printf(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    nd_buf_printf(&b, "<text x=\"%d\" y=\"18\" font-size=\"13\">training loss (%d steps)%s</text>\n", LEFT, n_train,
                  n_val ? " and validation loss per epoch" : "");
    /* grid and ticks */
    double ys = tick_step(f.y1 - f.y0, 6), xs = tick_step(f.x1 - f.x0, 8);
    for (double y = ceil(f.y0 / ys) * ys; y <= f.y1 + 1e-12; y += ys)
        nd_buf_printf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                      LEFT, W - RIGHT, py(&f, y), py(&f, y), LEFT - 5, py(&f, y) + 4, y);
    for (double x = ceil(f.x0 / xs) * xs; x <= f.x1 + 1e-12; x += xs)
        nd_buf_printf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px(&f, x),
                      H - BOTTOM + 15, x);
    nd_buf_printf(&b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", LEFT,
                  TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
    nd_buf_printf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (LEFT + W - RIGHT) / 2, H - 8);
    /* series */
    if (n_train > 0) {
        polyline(&b, &f, train, n_train, 1, "stroke=\"#9ecae1\" stroke-width=\"1\"");
        int win = n_train / 50 > 1 ? n_train / 50 : 1;
        if (win > 1) polyline(&b, &f, train, n_train, win, "stroke=\"#08519c\" stroke-width=\"2\"");
    }
    if (n_val > 0) {
        nd_buf_puts(&b, "<polyline fill=\"none\" stroke=\"#d94801\" stroke-width=\"2\" points=\"");
        for (int i = 0; i < n_val; i++)
            if (isfinite(val[i])) nd_buf_printf(&b, "%.1f,%.1f ", px(&f, val_step[i]), py(&f, val[i]));
        nd_buf_puts(&b, "\"/>\n");
        for (int i = 0; i < n_val; i++)
            if (isfinite(val[i]))
                nd_buf_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#d94801\"/>\n", px(&f, val_step[i]),
                              py(&f, val[i]));
    }
    /* legend */
    nd_buf_printf(&b, "<g transform=\"translate(%d,%d)\"><line x1=\"0\" x2=\"20\" y1=\"0\" y2=\"0\" stroke=\"#08519c\" "
                      "stroke-width=\"2\"/><text x=\"25\" y=\"4\">train</text>"
                      "<line x1=\"70\" x2=\"90\" y1=\"0\" y2=\"0\" stroke=\"#d94801\" stroke-width=\"2\"/>"
                      "<text x=\"95\" y=\"4\">validation</text></g>\n", W - RIGHT - 170, TOP + 15);
    nd_buf_puts(&b, "</svg>\n");
    if (b.oom) {
        nd_buf_free(&b);
        return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory for the plot", path);
    }
    nd_atomic_file af;
    int rc = nd_atomic_open(&af, path, err);
    if (!rc) {
        if (fwrite(b.data, 1, b.len, af.fp) != b.len) {
            nd_atomic_abort(&af);
            rc = nd_errorf(err, NEEDLE_EIO, "%s: write failed", path);
        } else {
            rc = nd_atomic_commit(&af, err);
        }
    }
    nd_buf_free(&b);
    return rc;
}
