/* hadamard.c - in-place fast Walsh-Hadamard transform, Sylvester ordering. */
#include "quant/hadamard.h"

#include <math.h>

int nd_is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

void nd_hadamard(float *x, int n)
{
    if (!nd_is_pow2(n)) return;
    /* The butterfly (a, b) -> (a + b, a - b) over strides 1, 2, 4, ... builds
     * exactly the Sylvester recursion H2n = [[Hn, Hn], [Hn, -Hn]]. */
    for (int h = 1; h < n; h *= 2) {
        for (int i = 0; i < n; i += 2 * h) {
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
    }
    /* one scale at the end keeps it orthonormal: 1/sqrt(n) */
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= s;
}
