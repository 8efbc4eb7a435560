"""RingContext: what the distributed layer needs of a plan exported with
`sparsering export PLAN --to torch --out DIR`: the plan (loaded by the export's own
sparsering_plan.py, which checks it against the running world and builds its process groups), this
rank's ring position, neighbours per level and head index, the token layout, the sparse settings,
and the groups the layer adds: a group per ring for the dK/dV accumulators and one for their return
to the owning rank (so their messages never interleave with K/V hops), and the gradient-sync group
(every rank: context and head parallelism split tokens and heads of one attention, the weights are
replicated on every rank of every replica). Covered by tests/python/ring_test.py.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass

import torch

from .layout import TokenLayout


@dataclass(frozen=True)
class SparseSettings:
    """The plan's `sparse` block (docs/configs.md)."""

    enabled: bool = True
    block_q: int = 64
    block_k: int = 64
    recall: float = 0.95
    max_verticals: int = 4096
    max_slashes: int = 4096
    last_q: int = 64


def load_plan_module(export_dir: str):
    """The sparsering_plan.py the export wrote into `export_dir`, imported under a private name."""
    path = os.path.join(export_dir, "sparsering_plan.py")
    if not os.path.isfile(path):
        raise ValueError(f"{export_dir} holds no sparsering_plan.py: export the plan with "
                         f"`sparsering export PLAN --to torch --out {export_dir}`")
    name = "_sparsering_plan_" + str(abs(hash(os.path.abspath(path))))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


class RingContext:
    """One rank's view of an exported plan, with every process group built. Construct on every rank
    after torch.distributed.init_process_group, in the same order (from_export)."""

    def __init__(self, plan, me, sparse: SparseSettings, backend: str | None = None,
                 replicate_kv_heads: bool = True):
        import torch.distributed as dist

        self.plan, self.me, self.sparse = plan, me, sparse
        self.replicate_kv_heads = replicate_kv_heads
        layout = plan.layout or {}
        self.layout = TokenLayout(layout.get("kind", "contiguous"), plan.seq_len_tokens, plan.context_parallel,
                                  int(layout.get("granularity_tokens", 0) or 0))
        self.level_sizes = [int(level["size"]) for level in plan.levels]
        self.cp_rank = me.cp_rank
        self.ring_ranks = list(me.ring_ranks)
        self.head_parallel = plan.head_parallel
        self.head_index = me.head_index
        by_head = {plan.role(r)["head_index"]: r for r in me.head_ranks}
        self.head_ranks = [by_head[h] for h in range(plan.head_parallel)]
        self.token_slice = tuple(plan.role(me.rank)["token_slice"])
        self.backend = dist.get_backend()
        self.acc_group = self.return_group = None
        for ring in plan.rings:  # every rank creates every group, in one order
            acc = dist.new_group(ranks=ring, backend=backend) if len(ring) > 1 else None
            ret = dist.new_group(ranks=ring, backend=backend) if len(ring) > 1 else None
            if me.rank in ring:
                self.acc_group, self.return_group = acc, ret
        self.grad_sync_group = dist.group.WORLD

    @classmethod
    def from_export(cls, export_dir: str, backend: str | None = None, replicate_kv_heads: bool = True,
                    **sparse_overrides) -> "RingContext":
        """Loads DIR/plan.json with DIR/sparsering_plan.py, checks it against the world, builds every
        group. `sparse_overrides` replace the plan's sparse settings (e.g. recall=0.9);
        `replicate_kv_heads` allows head_parallel larger than (a multiple of) the K/V heads."""
        module = load_plan_module(export_dir)
        plan = module.load(os.path.join(export_dir, "plan.json"))
        with open(os.path.join(export_dir, "plan.json"), encoding="utf-8") as f:
            sparse = dict(json.load(f).get("sparse", {}))
        unknown = set(sparse_overrides) - set(SparseSettings.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown sparse settings {sorted(unknown)}; valid: "
                             f"{sorted(SparseSettings.__dataclass_fields__)}")
        sparse.update(sparse_overrides)
        me = plan.setup(backend=backend)
        return cls(plan, me, SparseSettings(**sparse), backend, replicate_kv_heads)

    @property
    def seq_len_tokens(self) -> int:
        return self.plan.seq_len_tokens

    def position_ids(self, device=None) -> torch.Tensor:
        """Global positions of the tokens this rank feeds (its slice of its ring position's tokens)."""
        start, end = self.token_slice
        return self.layout.global_positions(self.cp_rank, device)[start:end]

    def local_tokens(self, tensor: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """The tokens this rank feeds, in local order, from a full-sequence tensor."""
        if tensor.shape[dim] != self.seq_len_tokens:
            raise ValueError(f"local_tokens: dimension {dim} has {tensor.shape[dim]} tokens, the plan "
                             f"{self.seq_len_tokens}")
        return tensor.index_select(dim, self.position_ids(tensor.device))

    def sync_gradients(self, parameters) -> None:
        """Averages the gradients of replicated weights over the gradient-sync group (every rank)."""
        import torch.distributed as dist

        world = dist.get_world_size(self.grad_sync_group)
        for p in parameters:
            if p.grad is not None:
                dist.all_reduce(p.grad, group=self.grad_sync_group)
                p.grad.div_(world)
