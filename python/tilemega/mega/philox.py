"""Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011), the counter-based generator of the generation graph's
sampling, and the Gumbel noise it draws (generation_state.py).

This is the reference: numpy, vectorised over counters, bit-exact with the
device code (generation_bodies.philox_word), which the CPU tests check
against the published known-answer vectors and the GPU check against the
kernel's picks. No state: word 0 of philox(counter, key) is the noise of
one (token, position, seed).
"""

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57      # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85      # key bumps (golden ratio, sqrt(3) - 1)
ROUNDS = 10
MASK = 0xFFFFFFFF


def philox(c0, c1, c2, c3, k0, k1):
    """The four output words of Philox-4x32-10 for counters (c0..c3) and
    key (k0, k1); arrays (broadcast) or ints, uint32 values."""
    c = [np.asarray(v, dtype=np.uint64) & MASK for v in (c0, c1, c2, c3)]
    k0 = np.asarray(k0, dtype=np.uint64) & MASK
    k1 = np.asarray(k1, dtype=np.uint64) & MASK
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = np.uint64(M0) * c[0], np.uint64(M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def uniform(word):
    """A uint32 word to a float32 in (0, 1): its top 23 bits plus one half,
    times 2^-23 (exact in float32 - a 24th bit would round the largest to
    1.0 and its noise to infinity - never 0 or 1)."""
    word = np.asarray(word, dtype=np.uint64)
    return (((word >> np.uint64(9)).astype(np.float64) + 0.5) * 2.0 ** -23).astype(np.float32)


def gumbel(tokens, pos, seed):
    """float64 Gumbel noise -log(-log(u)) of `tokens` (an int array) at
    position `pos` under a 64-bit seed, u from word 0 of Philox with counter
    (token, pos, 0, 0) and key (seed low, seed high)."""
    seed = int(seed)
    word = philox(tokens, pos, 0, 0, seed & MASK, seed >> 32)[0]
    u = uniform(word).astype(np.float64)
    return -np.log(-np.log(u))
