"""The generation state a generation graph keeps on the device.

`gen` is an int32 tensor of GEN_WORDS words that the step's tasks read and
its last task (bodies `sample_advance`) rewrites; `tokens` [max_seq_len] int32
holds the sequence: the prompt (positions < given) and what the steps append.
One launch is one decode step at position `gen[POS]`:

  reads tokens[pos], writes the k/v cache rows at pos, attends over keys
  0..pos, computes the logits of the next token and picks it (greedy);
  then, unless `gen[DONE]`:
    next = pos + 1
    if next >= gen[END]:       DONE = 1 (no room; pos stays)
    else:
      if next >= gen[GIVEN]:   tokens[next] = the pick, GENERATED += 1, and
                               DONE = 1 when the pick is gen[EOS] or next is
                               the last position (END - 1)
      pos = next
    LAST = the pick (also for positions whose next token is given: teacher
    forcing reads it)

The pick is greedy (the first largest logit) unless `sampling[0]`, the
inverse temperature 1/T, is > 0: then it is the first largest of
logit / T + Gumbel noise, the noise of token i at position pos drawn by
Philox-4x32-10 (philox.py) keyed by the seed words SEED_LO, SEED_HI with
counter (i, pos, 0, 0): an exact sample of softmax(logits / T) that a seed
reproduces. EOS holds the first stop id, EOS_MORE up to MAX_EOS - 1 more
(NO_EOS where unused); any of them stops the generation.

so repeated launches (back to back, or replayed from a CUDA graph) walk the
prompt and then generate with no host work between them, and a launch after
DONE recomputes the same position and changes nothing. The host sets
0 <= pos < END <= max_seq_len, GIVEN >= 1 and the tokens below GIVEN.

This module needs nothing but Python: the runtime side (tilemega.mega.engine)
and the bodies read the same words.
"""

GEN_WORDS = 16
POS, GIVEN, END, EOS, DONE, GENERATED, LAST, SEED_LO, SEED_HI = range(9)
EOS_MORE = tuple(range(9, 16))
EOS_WORDS = (EOS,) + EOS_MORE
MAX_EOS = len(EOS_WORDS)
NO_EOS = -1


def eos_ids(eos):
    """The stop ids as a list: None, an int or a sequence of up to MAX_EOS
    ints (ValueError otherwise)."""
    if eos is None:
        return []
    ids = [eos] if isinstance(eos, int) else list(eos)
    if len(ids) > MAX_EOS:
        raise ValueError(f"eos_token_id: {len(ids)} stop ids; at most {MAX_EOS} are supported")
    for t in ids:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise ValueError(f"eos_token_id: {t!r} is not a token id")
    return ids


def initial(pos, given, end, eos=None, seed=0):
    """The GEN_WORDS ints of a fresh generation state. eos: None, an id or
    a list of ids; seed: a 64-bit int for sampling."""
    words = [0] * GEN_WORDS
    words[POS], words[GIVEN], words[END] = int(pos), int(given), int(end)
    ids = eos_ids(eos)
    for w in EOS_WORDS:
        words[w] = NO_EOS
    for w, t in zip(EOS_WORDS, ids):
        words[w] = int(t)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be an int in [0, 2^64), got {seed!r}")
    lo, hi = seed & 0xFFFFFFFF, seed >> 32
    # int32 words: the bit patterns.
    words[SEED_LO] = lo - (1 << 32) if lo >= 1 << 31 else lo
    words[SEED_HI] = hi - (1 << 32) if hi >= 1 << 31 else hi
    return words


def stops(words, pick):
    """Whether `pick` is one of the state's stop ids."""
    return any(words[w] != NO_EOS and pick == words[w] for w in EOS_WORDS)


def advance(words, pick, tokens):
    """What one step does to the state (a list of GEN_WORDS ints) and to the
    token list when it picked `pick`: the reference of the device code, for
    the CPU tests and the simulator of a generation. Returns the new words."""
    words = list(words)
    if words[DONE]:
        return words
    words[LAST] = pick
    nxt = words[POS] + 1
    if nxt >= words[END]:
        words[DONE] = 1
        return words
    if nxt >= words[GIVEN]:
        tokens[nxt] = pick
        words[GENERATED] += 1
        if stops(words, pick) or nxt == words[END] - 1:
            words[DONE] = 1
    words[POS] = nxt
    return words
