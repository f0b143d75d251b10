"""The generation engine against transformers on the GPU (issue 9, item 8).

Random-weight checkpoints of two architectures, with the artifacts of
examples/generation.py (out/ or $TILEMEGA_ARTIFACTS):

  llama   Llama-3.2-1B configuration: llama3 rope scaling, tied embeddings
          (gen_llama1b, max_seq_len 4096); saved with save_pretrained and
          loaded by Engine.from_pretrained (safetensors)
  qwen2   Qwen2-0.5B shape with q/k/v biases and a GQA group of 7, untied
          LM head (gen_qwen2, max_seq_len 2048); from the in-memory model

Teacher-forced over the whole cache (positions 0 .. max_seq_len - 1, so near
1, in the middle and at the end): the same token sequence goes through
transformers in float32, transformers in bfloat16 and our kernel one
position per launch. At every step our logits' relative L2 to float32 must
be within 1.5x of transformers-bf16's own (plus a floor for steps where
both are tiny), the argmax agreement with float32 within 2 points of
transformers-bf16's, and the k/v cache rows we wrote must match
transformers' float32 cache as closely as its bf16 cache does (1.5x).
Free-running greedy generation must equal transformers-bf16's until the
first step where transformers' own top-2 logits are within bf16 noise.
"""

import json
import os
import sys

import pytest

from conftest import gpu_skip_reason

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ARTIFACTS = os.environ.get("TILEMEGA_ARTIFACTS", os.path.join(ROOT, "out"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

_REASON = gpu_skip_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

# What the checks compare, per architecture (filled by the tests, printed,
# and written to $TILEMEGA_RESULTS_DIR/generation_vs_transformers.json).
REPORT = {}


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    folder = os.environ.get("TILEMEGA_RESULTS_DIR")
    if folder and REPORT:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "generation_vs_transformers.json"), "w") as f:
            json.dump({"format": "tilemega.test-report", "version": 1,
                       "test": "test/pytest/test_generation_gpu.py",
                       "commit": os.environ.get("TILEMEGA_COMMIT", "unknown"),
                       "reports": REPORT}, f, indent=1, default=str)


def _artifact(name):
    path = os.path.join(ARTIFACTS, name + ".json")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: build it with `python examples/generation.py out`")
    return path


def hf_model(kind):
    """A random-weight transformers model of the artifact's configuration
    (float32, on the GPU, eval mode), seeded."""
    import torch
    import transformers

    import generation

    c = generation.CONFIGS["gen_llama1b" if kind == "llama" else "gen_qwen2"]
    common = dict(vocab_size=c["vocab"], hidden_size=c["hidden"],
                  intermediate_size=c["intermediate"], num_hidden_layers=c["layers"],
                  num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
                  head_dim=c["head_dim"], rms_norm_eps=c.get("eps", 1e-5),
                  tie_word_embeddings=c["tie_embeddings"], max_position_embeddings=32768)
    rope = dict(c.get("rope_scaling") or {"rope_type": "default"}, rope_theta=c["rope_theta"])
    if kind == "llama":
        make, cls = transformers.LlamaConfig, transformers.LlamaForCausalLM
    else:
        make, cls = transformers.Qwen2Config, transformers.Qwen2ForCausalLM
        common["use_sliding_window"] = False
    # transformers 5 takes rope_parameters; 4.x took rope_theta + rope_scaling.
    config = make(**common, rope_parameters=rope)
    if getattr(config, "rope_parameters", None) != rope:
        scaling = None if rope["rope_type"] == "default" else c["rope_scaling"]
        config = make(**common, rope_theta=c["rope_theta"], rope_scaling=scaling)
    torch.manual_seed(0)
    model = cls(config).to("cuda").float().eval()
    return model


def bf16_copy(model):
    """The model in bfloat16, as a bf16 checkpoint loads: weights and
    activations bf16, the rotary frequencies kept in float32 (`.to(bf16)`
    alone also rounds the inv_freq buffers, which moves the angles by
    radians at positions in the thousands)."""
    import copy

    import torch

    out = copy.deepcopy(model).to(torch.bfloat16)
    exact = {name: buf for name, buf in model.named_buffers() if name.endswith("inv_freq")}
    for name, buf in exact.items():
        owner, leaf = out.get_submodule(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]
        setattr(owner, leaf, buf.clone())
    return out


def bf16_noise(fp32_model, bf16_model, ids):
    """Per position of `ids` (a list): (float32 logits, the largest
    |bf16 - float32| logit difference), teacher-forced. Twice that bounds
    how far bf16 arithmetic can move the gap between two logits."""
    import torch

    with torch.no_grad():
        x = torch.tensor([ids], device="cuda")
        f32 = fp32_model(x).logits[0].float()
        b16 = bf16_model(x).logits[0].float()
    return f32, (b16 - f32).abs().max(dim=-1).values


def first_difference_is_a_near_tie(ours, theirs, gaps_at, noise_at):
    """None if `ours` equals `theirs`; else (index, gap, noise, ok): the first
    index where they differ, the reference's top-2 gap there, the bf16 noise
    there (3 x the largest bf16 logit error) and whether the gap is within
    it (a legitimate bf16 near-tie, after which sequences may part)."""
    i = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    if i is None:
        return None if len(ours) == len(theirs) else (min(len(ours), len(theirs)), 0, 0, False)
    gap, noise = float(gaps_at(i)), 3 * float(noise_at(i))
    return i, gap, noise, gap <= noise


def top2_gap(logits):
    import torch
    top = torch.topk(logits.float(), 2).values
    return (top[0] - top[1]).item()


def _cache_layers(cache):
    """[(keys, values)] per layer of a transformers cache ([1, Hkv, T, D])."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def _rel(a, b):
    import torch
    a, b = a.double(), b.double()
    return (torch.linalg.vector_norm(a - b, dim=-1) / torch.linalg.vector_norm(b, dim=-1))


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def case(request, tmp_path_factory):
    import torch

    from tilemega.mega.engine import Engine

    kind = request.param
    name = "gen_llama1b" if kind == "llama" else "gen_qwen2"
    model = hf_model(kind)
    S = 4096 if kind == "llama" else 2048
    if kind == "llama":
        folder = tmp_path_factory.mktemp("llama")
        # A bf16 checkpoint, saved from a copy: `model.to(bfloat16)` in
        # place would round the float32 reference's rotary inv_freq too.
        bf16_copy(model).save_pretrained(folder)
        engine = Engine.from_pretrained(str(folder), max_seq_len=S, artifact=_artifact(name),
                                        prefill=_artifact("prefill_" + name))
    else:
        engine = Engine.from_model(model, max_seq_len=S, artifact=_artifact(name),
                                   prefill=_artifact("prefill_" + name))
    gen = torch.Generator(device="cpu").manual_seed(1)
    seq = torch.randint(0, model.config.vocab_size, (S,), generator=gen)
    return kind, model, engine, seq


def test_teacher_forced_logits_and_cache_match_transformers(case):
    import torch

    kind, model, engine, seq = case
    S = engine.cfg.max_seq_len
    ids = seq.view(1, -1).cuda()
    with torch.no_grad():
        ref = model(ids, use_cache=True)
        fp32_logits = ref.logits[0].float()
        fp32_cache = _cache_layers(ref.past_key_values)
        bf16 = bf16_copy(model)
        out16 = bf16(ids, use_cache=True)
        bf16_logits = out16.logits[0].float()
        bf16_cache = _cache_layers(out16.past_key_values)
        del bf16, out16, ref

    # Ours: every position given, one launch a position.
    engine.start(seq.tolist(), max_new_tokens=1, teacher_forced=True)
    ours = torch.empty((S, engine.cfg.vocab), dtype=torch.bfloat16, device="cuda")
    for p in range(S):
        engine.step()
        ours[p].copy_(engine.tensors["logits"])
    engine.kernel.check()
    state = engine.state()
    assert state[0] == S - 1 and state[4] == 1, state   # walked to the end, no room left

    e_ours = _rel(ours.float(), fp32_logits)
    e_bf16 = _rel(bf16_logits, fp32_logits)
    ratio = e_ours / torch.clamp(e_bf16, min=1e-3)
    worst = int(torch.argmax(ratio))
    a_ours = (ours.float().argmax(-1) == fp32_logits.argmax(-1)).double().mean().item()
    a_bf16 = (bf16_logits.argmax(-1) == fp32_logits.argmax(-1)).double().mean().item()
    rows = []
    for layer, ((k32, v32), (k16, v16)) in enumerate(zip(fp32_cache, bf16_cache)):
        for what, ref32, ref16 in (("k", k32, k16), ("v", v32, v16)):
            mine = engine.tensors[f"l{layer}.{what}_cache"][:, :S].float()
            e_mine = _rel(mine.reshape(-1), ref32[0].float().reshape(-1)).item()
            e_theirs = _rel(ref16[0].float().reshape(-1), ref32[0].float().reshape(-1)).item()
            rows.append((layer, what, e_mine, e_theirs))
    REPORT[kind] = dict(
        steps=S, logits_rel_l2_ours_mean=e_ours.mean().item(),
        logits_rel_l2_bf16_mean=e_bf16.mean().item(), worst_ratio=ratio[worst].item(),
        worst_step=worst, argmax_agreement_ours=a_ours, argmax_agreement_bf16=a_bf16,
        cache_worst=max(rows, key=lambda r: r[2] / max(r[3], 1e-6)))
    print(kind, json.dumps(REPORT[kind]))
    assert ratio.max().item() <= 1.5, (
        f"{kind}: step {worst}: our logits are at {e_ours[worst]:.3g} of float32, "
        f"transformers-bf16 at {e_bf16[worst]:.3g}: {REPORT[kind]}")
    assert a_ours >= a_bf16 - 0.02, REPORT[kind]
    bad = [r for r in rows if r[2] > 1.5 * max(r[3], 1e-3)]
    assert not bad, f"{kind}: cache rows further from float32 than bf16's: {bad[:4]}"


def test_prefilled_cache_matches_transformers(case):
    """The prefill kernels' k/v rows for a 601-token prompt (two chunks)
    are as close to transformers-float32's cache as its bf16 cache is."""
    import torch

    kind, model, engine, seq = case
    P = 601
    ids = seq[:P].view(1, -1).cuda()
    with torch.no_grad():
        fp32_cache = _cache_layers(model(ids, use_cache=True).past_key_values)
        bf16 = bf16_copy(model)
        bf16_cache = _cache_layers(bf16(ids, use_cache=True).past_key_values)
        del bf16
    engine.start(seq[:P].tolist(), max_new_tokens=1)      # prefills rows 0 .. P - 2
    torch.cuda.synchronize()
    rows = []
    for layer, ((k32, v32), (k16, v16)) in enumerate(zip(fp32_cache, bf16_cache)):
        for what, ref32, ref16 in (("k", k32, k16), ("v", v32, v16)):
            mine = engine.tensors[f"l{layer}.{what}_cache"][:, :P - 1].float()
            e_mine = _rel(mine.reshape(-1), ref32[0, :, :P - 1].float().reshape(-1)).item()
            e_theirs = _rel(ref16[0, :, :P - 1].float().reshape(-1),
                            ref32[0, :, :P - 1].float().reshape(-1)).item()
            rows.append((layer, what, e_mine, e_theirs))
    REPORT.setdefault(kind, {})["prefill_cache_worst"] = max(
        rows, key=lambda r: r[2] / max(r[3], 1e-6))
    REPORT[kind]["prefill_ms_600_rows"] = engine.last_prefill_s * 1e3
    bad = [r for r in rows if r[2] > 1.5 * max(r[3], 1e-3)]
    assert not bad, f"{kind}: prefilled rows further from float32 than bf16's: {bad[:4]}"


def test_greedy_generation_matches_transformers_bf16(case):
    import torch

    kind, model, engine, seq = case
    prompt, new = seq[:16].tolist(), 48
    bf16 = bf16_copy(model)
    with torch.no_grad():
        out = bf16.generate(torch.tensor([prompt], device="cuda"), do_sample=False,
                            max_new_tokens=new, min_new_tokens=new, output_scores=True,
                            return_dict_in_generate=True, pad_token_id=0, eos_token_id=None)
    theirs = out.sequences[0, len(prompt):].tolist()
    ours = engine.generate(prompt, max_new_tokens=new, eos_token_id=[])
    assert len(ours) == new, ours
    f32, noise = bf16_noise(model, bf16, prompt + theirs)
    found = first_difference_is_a_near_tie(
        ours, theirs, lambda i: top2_gap(out.scores[i][0]),
        lambda i: noise[len(prompt) - 1 + i])
    REPORT.setdefault(kind, {})["greedy_first_difference"] = found
    print(kind, "greedy: first difference (index, gap, noise, near tie):", found)
    assert found is None or found[3], (
        f"{kind}: ours and transformers-bf16 differ at generated token {found[0]} although "
        f"transformers' top two logits are {found[1]:.4g} apart (bf16 noise {found[2]:.4g})")


def test_a_prompt_the_engine_cannot_take_is_a_value_error(case):
    kind, model, engine, seq = case
    with pytest.raises(ValueError, match=r"prompt_ids\[1\] = -3 is not a token id"):
        engine.generate([1, -3], max_new_tokens=4)
    with pytest.raises(ValueError, match="max_seq_len"):
        engine.generate([1] * engine.cfg.max_seq_len, max_new_tokens=4)
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.generate([1, 2], max_new_tokens=0)


def test_one_launch_generates_and_streams_the_same_tokens(case):
    kind, model, engine, seq = case
    prompt, new = seq[:16].tolist(), 40
    ours = engine.generate(prompt, max_new_tokens=new, eos_token_id=[])
    # The prefill wrote rows 0 .. 14; steps 15 .. 54 generate: one launch.
    assert engine.kernel.steps_done() == new
    streamed = list(engine.stream(prompt, max_new_tokens=new, eos_token_id=[]))
    assert streamed == ours and len(ours) == new


def test_caches_persisting_in_l2_generate_the_same_tokens(case):
    # Engine(l2_caches=True): the same kernel and tensors, its launches
    # with an L2 window over the k/v caches (one pool): a hint, so the
    # tokens are the same as without it.
    from tilemega.mega.engine import Engine

    kind, model, engine, seq = case
    prompt, new = seq[:16].tolist(), 24
    ours = engine.generate(prompt, max_new_tokens=new, eos_token_id=[])
    other = Engine(engine.cfg, engine.tensors, engine.kernel.kernel.artifact.path,
                   prefill=engine.prefill.art.path if engine.prefill else None,
                   l2_caches=True)
    assert other.kernel._l2_window is not None
    assert other.generate(prompt, max_new_tokens=new, eos_token_id=[]) == ours


def test_the_prefill_and_the_decode_kernel_share_one_graph_launch(case):
    """generate() replays the prefill's chunks and the persistent kernel
    from one captured graph; the same prompt prefilled by start() (its own
    graph) and the kernel launched alone gives the same cache rows and
    tokens."""
    import torch

    kind, model, engine, seq = case
    prompt, new = seq[:600].tolist(), 12          # rows 0 .. 598: two chunks
    ours = engine.generate(prompt, max_new_tokens=new, eos_token_id=[])
    assert (2, True) in engine._graphs, "the two-chunk graph was not captured"
    assert engine.kernel.steps_done() == new
    rows = {n: engine.tensors[n][:, :len(prompt) - 1].clone()
            for n in ("l0.k_cache", f"l{engine.cfg.layers - 1}.v_cache")}
    for n in rows:
        engine.tensors[n].zero_()
    engine.start(prompt, max_new_tokens=new, eos_token_id=[])
    engine._launch_generation()
    torch.cuda.synchronize()
    engine._check_kernel(len(prompt))
    alone = engine._read_tokens(len(prompt), len(prompt) + new)
    assert alone == ours
    for n, r in rows.items():
        assert torch.equal(engine.tensors[n][:, :len(prompt) - 1], r), n


def test_each_generation_sees_its_own_prompt(case):
    """A generation's prompt, state and prefill spans reach the device from
    one reused pinned buffer, by copies inside its graph launch
    (staging.py): prompts of two prefill chunks, one and none, generated in
    a row and again in the other order, give the same tokens, and the same
    as start()'s own copies followed by the launch alone."""
    import torch

    kind, model, engine, seq = case
    prompts = [seq[:600].tolist(), seq[1000:1016].tolist(), seq[2000:2001].tolist()]
    first = [engine.generate(p, max_new_tokens=8, eos_token_id=[]) for p in prompts]
    again = [engine.generate(p, max_new_tokens=8, eos_token_id=[]) for p in prompts[::-1]]
    assert first == again[::-1]
    for p, want in zip(prompts, first):
        engine.start(p, max_new_tokens=8, eos_token_id=[])
        engine._launch_generation()
        torch.cuda.synchronize()
        engine._check_kernel(len(p))
        assert engine._read_tokens(len(p), len(p) + 8) == want


def test_generation_stops_at_any_of_several_eos_ids(case):
    kind, model, engine, seq = case
    prompt = seq[:16].tolist()
    free = engine.generate(prompt, max_new_tokens=24, eos_token_id=[])
    stops = [free[12], free[5]]
    first = min(i for i, t in enumerate(free) if t in stops)
    assert engine.generate(prompt, max_new_tokens=24, eos_token_id=stops) == free[:first + 1]
    assert list(engine.stream(prompt, max_new_tokens=24, eos_token_id=stops)) == \
        free[:first + 1]


def test_a_seed_reproduces_a_sampled_generation(case):
    kind, model, engine, seq = case
    prompt = seq[:16].tolist()
    a = engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=0.8, seed=5)
    b = engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=0.8, seed=5)
    c = engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=0.8, seed=6)
    greedy = engine.generate(prompt, max_new_tokens=32, eos_token_id=[])
    assert a == b and len(a) == 32
    assert a != c and a != greedy
    kw = dict(max_new_tokens=32, eos_token_id=[], temperature=0.8, top_k=50, top_p=0.9)
    d = engine.generate(prompt, seed=5, **kw)
    assert d == engine.generate(prompt, seed=5, **kw) and d != engine.generate(prompt, seed=6,
                                                                               **kw)
    # top_k = 1 is greedy whatever the temperature and seed.
    assert engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=2.0,
                           top_k=1, seed=9) == greedy
    # The whole vocabulary filtered (generation_bodies.sample_filtered):
    # top-p alone and top-k over the candidates' 64 (with top-p too)
    # reproduce with a seed;
    # a top-p too small for any token but the first is greedy (the rounds
    # must walk down to the top-ranked token).
    for kw in (dict(top_p=0.9), dict(top_k=200, top_p=0.9), dict(top_k=200),
               dict(top_k=engine.cfg.vocab)):
        kw.update(max_new_tokens=32, eos_token_id=[], temperature=0.8)
        e = engine.generate(prompt, seed=5, **kw)
        assert e == engine.generate(prompt, seed=5, **kw), kw
        assert e != engine.generate(prompt, seed=6, **kw), kw
    assert e == a          # top-k of the whole vocabulary: temperature alone
    assert engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=1.5,
                           top_p=1e-7, seed=9) == greedy
    assert engine.generate(prompt, max_new_tokens=32, eos_token_id=[], temperature=1.5,
                           top_k=300, top_p=1e-7, seed=9) == greedy


def test_the_cli_streams_a_saved_checkpoints_tokens(tmp_path):
    """python -m tilemega.generate on a saved random-weight checkpoint: the
    ids it prints are the engine's, greedy and sampled."""
    import subprocess

    import torch

    from tilemega.mega.engine import Engine

    folder = tmp_path / "llama"
    bf16_copy(hf_model("llama")).save_pretrained(folder)
    artifact = _artifact("gen_llama1b")
    prefill = _artifact("prefill_gen_llama1b")
    engine = Engine.from_pretrained(str(folder), max_seq_len=4096, artifact=artifact,
                                    prefill=prefill)
    prompt = [5, 17, 923, 4000]
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(root, "python")] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    for extra, kw in (([], {}), (["--temperature", "0.9", "--seed", "11"],
                                 dict(temperature=0.9, seed=11)),
                      (["--temperature", "0.9", "--top-k", "40", "--top-p", "0.8"],
                       dict(temperature=0.9, top_k=40, top_p=0.8))):
        want = engine.generate(prompt, max_new_tokens=12, eos_token_id=[], **kw)
        proc = subprocess.run(
            [sys.executable, "-m", "tilemega.generate", "--model", str(folder),
             "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", "12",
             "--artifact", artifact, "--prefill", prefill, "--eos-id", "none", *extra],
            capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert [int(t) for t in proc.stdout.split()] == want, (proc.stdout, want)
        assert "12 tokens in one launch" in proc.stderr, proc.stderr
    del engine
    torch.cuda.empty_cache()
