"""The configuration rule the parametrised examples share (gemm,
gemm_hopper, decode_attention): the module's DEFAULTS updated with the
caller's overrides, an unknown key being an error that names the example.
Pure Python: the GPU-side checks load it without the compiler."""


def with_defaults(defaults, overrides, example):
    """dict(defaults) updated with `overrides`; TypeError naming `example`
    and the unknown keys otherwise."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(f"unknown {example} parameters: {sorted(unknown)}")
    cfg = dict(defaults)
    cfg.update(overrides)
    return cfg
