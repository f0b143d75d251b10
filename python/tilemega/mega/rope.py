"""RoPE tables of the generation graph, computed as transformers computes them.

The graph reads cos/sin [max_seq_len, head_dim/2] (float32) at the step's
position; the host fills them once. Frequencies follow transformers'
`_compute_default_rope_parameters` and `_compute_llama3_parameters`
(modeling_rope_utils.py): inverse frequencies in float32, angles
position * inv_freq in float32, cos and sin of those. numpy only (the GPU
machine and CI both import it).
"""

import math

import numpy as np

#: rope_type values the graph serves; anything else is an error naming it.
ROPE_TYPES = ("default", "llama3")


def rope_type(scaling):
    """The rope type of a config's rope_scaling / rope_parameters dict (None:
    default); ValueError for one we do not compute."""
    if not scaling:
        return "default"
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"rope_scaling.rope_type: {kind!r} is not supported "
                         f"(supported: {', '.join(ROPE_TYPES)})")
    return kind


def inv_freq(head_dim, theta, scaling=None):
    """float32 [head_dim / 2] inverse frequencies."""
    dim = np.float32(head_dim)
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / dim
    freq = (np.float32(1.0) / (np.float32(theta) ** exponents)).astype(np.float32)
    if rope_type(scaling) == "llama3":
        freq = _llama3(freq, scaling)
    return freq


def _llama3(freq, scaling):
    def field(name):
        if name not in scaling:
            raise ValueError(f"rope_scaling.{name}: missing (llama3 rope scaling needs factor, "
                             "low_freq_factor, high_freq_factor, "
                             "original_max_position_embeddings)")
        return float(scaling[name])

    factor, low, high = field("factor"), field("low_freq_factor"), field("high_freq_factor")
    old = field("original_max_position_embeddings")
    if not (factor > 0 and high > low > 0 and old > 0):
        raise ValueError(f"rope_scaling: factor {factor}, low_freq_factor {low}, "
                         f"high_freq_factor {high}, original_max_position_embeddings {old}: "
                         "need factor > 0 and high_freq_factor > low_freq_factor > 0")
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = (2 * math.pi / freq).astype(np.float32)
    scaled = np.where(wavelen > low_wavelen, freq / np.float32(factor), freq).astype(np.float32)
    smooth = ((old / wavelen - low) / (high - low)).astype(np.float32)
    smoothed = ((1 - smooth) * scaled / np.float32(factor) + smooth * scaled).astype(np.float32)
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def tables(max_seq_len, head_dim, theta, scaling=None):
    """(cos, sin), float32 [max_seq_len, head_dim / 2]: the rotation of
    every position (attention scaling 1: default and llama3 have none)."""
    positions = np.arange(max_seq_len, dtype=np.float32)
    angles = (positions[:, None] * inv_freq(head_dim, theta, scaling)[None, :]).astype(np.float32)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
