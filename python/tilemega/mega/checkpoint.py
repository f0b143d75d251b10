"""Hugging Face checkpoints in, the generation graph's config and tensors out.

    cfg = read_config("llama-dir", max_seq_len=4096)      # config.json
    tensors = load_tensors("llama-dir", cfg)               # *.safetensors
    cfg, tensors = from_transformers(model, max_seq_len=4096)

A checkpoint folder holds `config.json` and `model.safetensors`, or shards
listed by `model.safetensors.index.json`. Architectures: LlamaForCausalLM
and Qwen2ForCausalLM (model_type llama / qwen2). The loader fuses q/k/v (and
their biases) into `l{i}.wqkv` / `l{i}.bqkv` and gate/up into `l{i}.wgu`,
names everything as models.generation_graph does, converts to bfloat16 on
the device and adds the rope tables (rope.py). Everything in a checkpoint
is untrusted: a field or tensor we cannot serve is a ValueError naming the
file and the field (or tensor) before any GPU work; nothing is downloaded.
"""

import json
import math
import os

from .models import ModelConfig
from .rope import rope_type

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}


def _field(config, name, source, kind=int, default=None, required=True):
    if name not in config or config[name] is None:
        if required and default is None:
            raise ValueError(f"{source}: field {name!r} is missing")
        return default
    value = config[name]
    ok = (isinstance(value, bool) if kind is bool else
          isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
          isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        raise ValueError(f"{source}: field {name!r} must be {kind.__name__}, got {value!r}")
    return kind(value)


def config_from_dict(config, max_seq_len, source="config"):
    """A ModelConfig from a transformers config dict (config.json); ValueError
    naming `source` and the field it cannot serve."""
    if not isinstance(config, dict):
        raise ValueError(f"{source}: expected a JSON object")
    archs = config.get("architectures") or []
    model_type = config.get("model_type")
    kinds = {ARCHITECTURES[a] for a in archs if a in ARCHITECTURES}
    if archs and not kinds:
        raise ValueError(f"{source}: field 'architectures': {archs} (supported: "
                         f"{', '.join(ARCHITECTURES)})")
    kind = kinds.pop() if kinds else model_type
    if kind not in ARCHITECTURES.values():
        raise ValueError(f"{source}: field 'model_type': {model_type!r} (supported: "
                         f"{', '.join(ARCHITECTURES.values())})")
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"{source}: field 'hidden_act': {act!r}; the MLP is SiLU-gated")
    if config.get("mlp_bias"):
        raise ValueError(f"{source}: field 'mlp_bias': true is not supported")
    if kind == "llama" and config.get("attention_bias"):
        raise ValueError(f"{source}: field 'attention_bias': true (an o_proj bias) is not "
                         "supported")
    if kind == "qwen2" and config.get("use_sliding_window"):
        raise ValueError(f"{source}: field 'use_sliding_window': true is not supported")
    hidden = _field(config, "hidden_size", source)
    heads = _field(config, "num_attention_heads", source)
    if heads < 1 or hidden % heads and "head_dim" not in config:
        raise ValueError(f"{source}: field 'num_attention_heads': {heads} does not divide "
                         f"hidden_size {hidden}")
    # transformers 5 keeps rope_theta and the scaling in rope_parameters.
    rope = config.get("rope_parameters") or config.get("rope_scaling") or None
    if rope is not None and not isinstance(rope, dict):
        raise ValueError(f"{source}: field 'rope_scaling': expected an object, got {rope!r}")
    try:
        kind_of_rope = rope_type(rope)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    theta = (rope or {}).get("rope_theta", config.get("rope_theta", 10000.0))
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
        raise ValueError(f"{source}: field 'rope_theta': {theta!r}")
    cfg = ModelConfig(
        layers=_field(config, "num_hidden_layers", source),
        hidden=hidden,
        intermediate=_field(config, "intermediate_size", source),
        heads=heads,
        kv_heads=_field(config, "num_key_value_heads", source, default=heads),
        head_dim=_field(config, "head_dim", source, default=hidden // max(heads, 1)),
        vocab=_field(config, "vocab_size", source),
        max_seq_len=int(max_seq_len),
        eps=_field(config, "rms_norm_eps", source, float, default=1e-6),
        qkv_bias=kind == "qwen2",
        tie_embeddings=_field(config, "tie_word_embeddings", source, bool, default=False,
                              required=False) or False,
        rope_theta=float(theta),
        rope_scaling=dict(rope) if kind_of_rope != "default" else None,
    )
    try:
        return cfg.check(source)
    except ValueError as e:
        message = str(e)
        for ours, theirs in (("layers", "num_hidden_layers"), ("hidden", "hidden_size"),
                             ("intermediate", "intermediate_size"),
                             ("heads", "num_attention_heads"),
                             ("kv_heads", "num_key_value_heads"), ("vocab", "vocab_size"),
                             ("eps", "rms_norm_eps")):
            message = message.replace(f": {ours}: ", f": field {theirs!r}: ", 1)
        raise ValueError(message) from None


def read_config(path, max_seq_len=4096):
    """config_from_dict of `path`/config.json."""
    file = os.path.join(path, "config.json")
    try:
        with open(file) as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{file}: no such file (a checkpoint folder holds config.json)") \
            from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: not valid JSON: {e}") from None
    return config_from_dict(config, max_seq_len, file)


# ------------------------------------------------------------------ tensors


def hf_names(cfg):
    """{our name: [checkpoint tensor names fused in order]} of cfg's weights."""
    names = {"embed": ["model.embed_tokens.weight"], "final_norm": ["model.norm.weight"]}
    if not cfg.tie_embeddings:
        names["lm_head"] = ["lm_head.weight"]
    for i in range(cfg.layers):
        p, a, m = f"model.layers.{i}.", f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp."
        names[f"l{i}.attn_norm"] = [p + "input_layernorm.weight"]
        names[f"l{i}.wqkv"] = [a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"]
        if cfg.qkv_bias:
            names[f"l{i}.bqkv"] = [a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"]
        names[f"l{i}.wo"] = [a + "o_proj.weight"]
        names[f"l{i}.mlp_norm"] = [p + "post_attention_layernorm.weight"]
        names[f"l{i}.wgu"] = [m + "gate_proj.weight", m + "up_proj.weight"]
        names[f"l{i}.wd"] = [m + "down_proj.weight"]
    return names


def _part_shapes(cfg):
    """{checkpoint tensor name: expected shape}."""
    H, D, I, V = cfg.hidden, cfg.head_dim, cfg.intermediate, cfg.vocab
    q, kv = cfg.heads * D, cfg.kv_heads * D
    per = {"input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
           "self_attn.q_proj.weight": (q, H), "self_attn.k_proj.weight": (kv, H),
           "self_attn.v_proj.weight": (kv, H), "self_attn.o_proj.weight": (H, q),
           "self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,),
           "self_attn.v_proj.bias": (kv,), "mlp.gate_proj.weight": (I, H),
           "mlp.up_proj.weight": (I, H), "mlp.down_proj.weight": (H, I)}
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,),
              "lm_head.weight": (V, H)}
    for i in range(cfg.layers):
        shapes.update({f"model.layers.{i}.{k}": v for k, v in per.items()})
    return shapes


def safetensors_files(path):
    """{checkpoint tensor name: file} of the folder (one file or an index)."""
    index = os.path.join(path, "model.safetensors.index.json")
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(index):
        try:
            with open(index) as f:
                weight_map = json.load(f).get("weight_map")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
            raise ValueError(f"{index}: not a safetensors index: {e}") from None
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: field 'weight_map': missing or not an object")
        files = {}
        for name, file in weight_map.items():
            if (not isinstance(file, str) or os.path.isabs(file) or ".." in file.split("/")
                    or os.path.dirname(file)):
                raise ValueError(f"{index}: field 'weight_map.{name}': {file!r} is not a file "
                                 "name in the checkpoint folder")
            files[name] = os.path.join(path, file)
        return files
    if os.path.exists(single):
        from safetensors import safe_open

        try:
            with safe_open(single, framework="np") as f:
                return {name: single for name in f.keys()}
        except Exception as e:   # safetensors raises its own error types
            raise ValueError(f"{single}: not a readable safetensors file: {e}") from None
    raise ValueError(f"{path}: neither model.safetensors nor model.safetensors.index.json")


def _is_float(tensor):
    dtype = getattr(tensor, "dtype", None)
    if hasattr(tensor, "is_floating_point"):          # torch
        return tensor.is_floating_point()
    return getattr(dtype, "kind", None) == "f"        # numpy


def _checked(name, tensor, expected, source):
    if not hasattr(tensor, "shape") or not _is_float(tensor):
        raise ValueError(f"{source}: tensor {name!r}: expected a float tensor, got "
                         f"{getattr(tensor, 'dtype', type(tensor).__name__)}")
    if tuple(tensor.shape) != tuple(expected):
        raise ValueError(f"{source}: tensor {name!r} has shape {list(tensor.shape)}, the "
                         f"config implies {list(expected)}")
    return tensor


def fuse(cfg, get, source, convert):
    """{our weight name: tensor} from `get(checkpoint name) -> (tensor,
    where)` (None when missing), each checkpoint tensor checked (float,
    the shape the config implies) and passed through `convert` before the
    fused ones (q/k/v, gate/up) are concatenated along rows."""
    shapes = _part_shapes(cfg)
    out = {}
    for ours, parts in hf_names(cfg).items():
        pieces = []
        for name in parts:
            got = get(name)
            if got is None:
                raise ValueError(f"{source}: tensor {name!r} is missing (needed for {ours})")
            tensor, where = got
            pieces.append(convert(_checked(name, tensor, shapes[name], where)))
        if len(pieces) == 1:
            out[ours] = pieces[0]
        elif hasattr(pieces[0], "is_floating_point"):
            import torch
            out[ours] = torch.cat(pieces, 0).contiguous()
        else:
            import numpy as np
            out[ours] = np.concatenate(pieces, 0)
    return out


def device_bytes(cfg):
    """Bytes of every tensor the generation graph binds (weights, tables,
    caches, state, logits)."""
    from . import generation_reference as ref

    size = {"bfloat16": 2, "float32": 4, "int32": 4}
    total = 0
    for shape, dtype in ref.tensor_specs(cfg).values():
        count = 1
        for extent in shape:
            count *= extent
        total += count * size[dtype]
    return total


def check_fits(cfg, source, free_bytes):
    """ValueError naming max_seq_len when the graph's tensors (device_bytes)
    and a margin of 1 GiB for the kernel's scratch and the runtime do not fit
    `free_bytes`; called before anything is allocated."""
    need = device_bytes(cfg)
    margin = 1 << 30
    if need + margin > free_bytes:
        caches = 2 * cfg.layers * cfg.kv_heads * cfg.max_seq_len * cfg.head_dim * 2
        raise ValueError(f"{source}: max_seq_len {cfg.max_seq_len}: the model's tensors need "
                         f"{need / 2**30:.1f} GiB (the k/v caches {caches / 2**30:.1f} GiB of "
                         f"it) plus 1 GiB of scratch, but the device has "
                         f"{free_bytes / 2**30:.1f} GiB free")


def assemble(cfg, get, source, device="cuda"):
    """The graph's tensors (torch, on `device`) from `get` (fuse): the
    weights in bfloat16, the rope tables, the state (tokens, gen, sampling) and the
    caches and logits, zeroed."""
    import torch

    from . import generation_reference as ref
    from .rope import tables

    dev = torch.device(device)
    if dev.type == "cuda":
        check_fits(cfg, source, torch.cuda.mem_get_info(dev)[0])

    def convert(t):
        if not isinstance(t, torch.Tensor):
            t = torch.from_numpy(t)
        return t.to(device=device, dtype=torch.bfloat16)

    out = fuse(cfg, get, source, convert)
    cos, sin = tables(cfg.max_seq_len, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    out["rope_cos"] = torch.from_numpy(cos).to(device)
    out["rope_sin"] = torch.from_numpy(sin).to(device)
    dtypes = {"bfloat16": torch.bfloat16, "int32": torch.int32, "float32": torch.float32}
    specs = {name: (shape, dtypes[dtype]) for name, (shape, dtype) in ref.tensor_specs(cfg).items()
             if name not in out}
    # The k/v caches as views of one pool, so that one L2 window covers
    # them all (Engine(l2_caches=True)).
    caches = [name for name in specs if name.endswith("_cache")]
    if caches and len({specs[n][1] for n in caches}) == 1:
        sizes = [math.prod(specs[n][0]) for n in caches]
        pool = torch.zeros(sum(sizes), dtype=specs[caches[0]][1], device=device)
        for name, part in zip(caches, torch.split(pool, sizes)):
            out[name] = part.view(specs[name][0])
    for name, (shape, dt) in specs.items():
        if name not in out:
            out[name] = torch.zeros(shape, dtype=dt, device=device)
    return out


def reader(path, framework="pt"):
    """get(name) -> (tensor, file) over the safetensors of folder `path`
    (framework "pt" or "np"), and the handles' closer."""
    from safetensors import safe_open

    files = safetensors_files(path)
    handles = {}

    def get(name):
        file = files.get(name)
        if file is None:
            return None
        if file not in handles:
            try:
                handles[file] = safe_open(file, framework=framework)
            except Exception as e:   # safetensors raises its own error types
                raise ValueError(f"{file}: not a readable safetensors file: {e}") from None
        try:
            return handles[file].get_tensor(name), file
        except Exception as e:
            raise ValueError(f"{file}: tensor {name!r}: {e}") from None

    return get


def load_tensors(path, cfg, device="cuda"):
    """The graph's tensors from the safetensors of checkpoint folder `path`."""
    return assemble(cfg, reader(path, "pt"), path, device)


def from_transformers(model, max_seq_len=4096, device="cuda"):
    """(cfg, tensors) of an in-memory transformers LlamaForCausalLM or
    Qwen2ForCausalLM."""
    config = model.config.to_dict()
    cfg = config_from_dict(config, max_seq_len, f"{type(model).__name__}.config")
    state = model.state_dict()
    source = type(model).__name__

    def get(name):
        if name == "lm_head.weight" and name not in state:
            return None
        return (state[name], source) if name in state else None

    return cfg, assemble(cfg, get, source, device)
