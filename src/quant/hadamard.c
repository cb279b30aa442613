/* hadamard.c - in-place fast Walsh-Hadamard transform, Sylvester ordering.
 *
 * The one implementation: CQ quantisation, the engine's CPU backend and the
 * trainer's Hadamard MLP all call nd_hadamard.  Every path does the same
 * butterflies (a, b) -> (a + b, a - b) in the same stage order and one final
 * scale, so the AVX-512, vector and scalar paths give the same bits. */
#include "quant/hadamard.h"

#include "quant/hadamard_impl.h"

int nd_is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

void nd_hadamard(float *x, int n) { nd_hadamard_inline(x, n); }
