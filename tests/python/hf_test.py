#!/usr/bin/python3
"""The Hugging Face drop-in (ctest labels torch, cpu; exit 77 without transformers): a tiny
Qwen2 model built from its config with attn_implementation="sparsering" at recall 1.0 gives the
logits and gradients of the same model with "eager" attention (fp32, rel L2 <= 1e-4); a padding
mask raises ValueError.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import SKIP, Checks, import_torch, rel, test_seed  # noqa: E402

torch = import_torch()
try:
    import transformers  # noqa: F401
    from transformers import Qwen2Config, Qwen2ForCausalLM
except Exception as error:  # pylint: disable=broad-except
    print(f"SKIPPED: transformers cannot be imported ({error})")
    sys.exit(SKIP)

import sparsering.hf  # noqa: E402


def main():
    checks = Checks("hf_test")
    seed = test_seed("hf_test")
    if not sparsering.hf.register(recall=1.0):
        print("SKIPPED: this transformers has no AttentionInterface")
        return SKIP
    config = Qwen2Config(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    torch.manual_seed(seed)
    ids = torch.randint(0, 256, (1, 200))
    results = {}
    for impl in ("eager", "sparsering"):
        torch.manual_seed(seed)
        config._attn_implementation = impl
        model = Qwen2ForCausalLM(config).float()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        results[impl] = (out.logits.detach(), model.model.layers[0].self_attn.q_proj.weight.grad.clone())
    checks.bound("logits rel L2 vs eager", rel(torch, results["sparsering"][0], results["eager"][0]), 1e-4)
    checks.bound("q_proj grad rel L2 vs eager", rel(torch, results["sparsering"][1], results["eager"][1]), 1e-4)
    try:
        sparsering.hf.attention_forward(None, torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 4, 8),
                                        torch.zeros(1, 2, 4, 8), torch.zeros(1, 1, 4, 4))
        checks.true("padding mask rejected", False, "accepted")
    except ValueError as error:
        checks.true(f"padding mask rejected: {error}", True)
    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
