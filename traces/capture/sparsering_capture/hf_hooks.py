"""Hooks Hugging Face transformers decoder models (Qwen2, Llama, Mistral and others built the
same way) so that every attention layer hands its post-RoPE Q and K to CaptureSession.record.

Primary path (transformers >= 4.48, including 5.x): the model's attention modules look their
attention function up in transformers' ALL_ATTENTION_FUNCTIONS at every call, with query and key
already rotated (key before the GQA repeat); capture_attention() swaps the entry of the model's
implementation for a wrapper that records and then calls the original, and restores it on exit.
Fallback (older modeling files): the module-level apply_rotary_pos_emb of the attention module's
modeling file is wrapped, and a forward pre-hook on each attention module tells it the layer.
Exercised on the GPU machine by traces/capture/run_on_device.sh; the hook itself is tested with a
minimal decoder in tests/capture/capture_test.py.
"""
import contextlib
import math
import os
import sys

import torch


def _attention_modules(model):
    """(layer_idx, module) of every attention module that carries a layer index."""
    found = []
    for name, module in model.named_modules():
        if name.endswith("self_attn") and hasattr(module, "layer_idx"):
            found.append((int(module.layer_idx), module))
    return found


@contextlib.contextmanager
def capture_attention(model, session_ref):
    """While active, each attention call of `model` calls session_ref[0].record(layer, q, k).
    `session_ref` is a one-element list so the caller can switch sessions between samples."""
    modules = _attention_modules(model)
    if not modules:
        raise ValueError("the model has no '*.self_attn' modules with a layer_idx; call "
                         "CaptureSession.record(layer, q, k) from its attention instead")
    implementation = getattr(model.config, "_attn_implementation", None)
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        ALL_ATTENTION_FUNCTIONS = None
    if ALL_ATTENTION_FUNCTIONS is not None and implementation not in (None, "eager"):
        original = ALL_ATTENTION_FUNCTIONS[implementation]

        def recording_attention(module, query, key, *args, **kwargs):
            scaling = kwargs.get("scaling")
            if scaling is not None and not math.isclose(float(scaling), session_ref[0].softmax_scale, rel_tol=1e-6):
                raise ValueError(f"layer {module.layer_idx} scales logits by {scaling}, the capture assumed "
                                 f"{session_ref[0].softmax_scale}")
            session_ref[0].record(module.layer_idx, query, key)
            return original(module, query, key, *args, **kwargs)

        ALL_ATTENTION_FUNCTIONS[implementation] = recording_attention
        try:
            yield
        finally:
            ALL_ATTENTION_FUNCTIONS[implementation] = original
        return
    # Fallback: wrap the rotary embedding of the modeling file.
    modeling = sys.modules[type(modules[0][1]).__module__]
    rotate = getattr(modeling, "apply_rotary_pos_emb", None)
    if rotate is None:
        raise ValueError(f"{modeling.__name__} has no apply_rotary_pos_emb and the model does not use the "
                         f"attention interface; call CaptureSession.record from its attention")
    current = [None]

    def recording_rotate(q, k, *args, **kwargs):
        q_rot, k_rot = rotate(q, k, *args, **kwargs)
        session_ref[0].record(current[0], q_rot, k_rot)
        return q_rot, k_rot

    handles = [m.register_forward_pre_hook(lambda _m, _a, layer=i: current.__setitem__(0, layer)) for i, m in modules]
    modeling.apply_rotary_pos_emb = recording_rotate
    try:
        yield
    finally:
        modeling.apply_rotary_pos_emb = rotate
        for handle in handles:
            handle.remove()


def load_model(path, dtype, device, seed):
    """The decoder (no LM head: logits at 128K tokens would not fit) of a local model folder:
    its weights if the folder holds any, else a random initialisation (seeded) of its config.json.
    Returns (model, config)."""
    from transformers import AutoConfig, AutoModel
    if not os.path.isdir(path):
        raise ValueError(f"--model {path} is not a folder with a config.json")
    config = AutoConfig.from_pretrained(path)
    try:  # SDPA: memory-efficient at 128K tokens, and reached through the attention interface
        config._attn_implementation = "sdpa"
    except (AttributeError, ValueError):
        pass
    weights = [f for f in os.listdir(path) if f.endswith((".safetensors", ".bin")) and not f.startswith("qk_")]
    if weights:
        model = AutoModel.from_pretrained(path, config=config, torch_dtype=dtype)
        model = model.to(device)
    else:
        torch.manual_seed(seed)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = AutoModel.from_config(config)
        finally:
            torch.set_default_dtype(previous)
    model.eval()
    return model, config


def attention_shape(config):
    """(layers, q_heads, kv_heads, head_dim) of a transformers decoder config."""
    q_heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // q_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or q_heads
    return config.num_hidden_layers, q_heads, kv_heads, head_dim
