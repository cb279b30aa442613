/* hadamard.h - the fast orthonormal Walsh-Hadamard transform.
 *
 * Hn is the Sylvester Hadamard matrix (H1 = [1], H2n = [[Hn, Hn], [Hn, -Hn]])
 * divided by sqrt(n): symmetric and orthonormal, so applying it twice is the
 * identity and x Hn == Hn x.  CQ quantisation rotates every 128-group with it
 * and the Hadamard MLP applies it at the model width (SPEC sections 4 and 8).
 */
#ifndef ND_HADAMARD_H
#define ND_HADAMARD_H

/* 1 when n is a positive power of two. */
int nd_is_pow2(int n);

/* x <- Hn x in place, O(n log n).  n must be a power of two (callers check
 * with nd_is_pow2; other n leave x unchanged). */
void nd_hadamard(float *x, int n);

#endif
