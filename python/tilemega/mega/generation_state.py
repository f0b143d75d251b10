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

so repeated launches (back to back, or replayed from a CUDA graph) walk the
prompt and then generate with no host work between them, and a launch after
DONE recomputes the same position and changes nothing. The host sets
0 <= pos < END <= max_seq_len, GIVEN >= 1 and the tokens below GIVEN.

This module needs nothing but Python: the runtime side (tilemega.mega.engine)
and the bodies read the same words.
"""

GEN_WORDS = 8
POS, GIVEN, END, EOS, DONE, GENERATED, LAST = range(7)
NO_EOS = -1


def initial(pos, given, end, eos=None):
    """The GEN_WORDS ints of a fresh generation state."""
    words = [0] * GEN_WORDS
    words[POS], words[GIVEN], words[END] = int(pos), int(given), int(end)
    words[EOS] = NO_EOS if eos is None else int(eos)
    return words


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
        if pick == words[EOS] or nxt == words[END] - 1:
            words[DONE] = 1
    words[POS] = nxt
    return words
