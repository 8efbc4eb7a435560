#!/usr/bin/env python3
"""tuner/python/sparsering_plan.py in real torch.distributed (gloo, CPU), as ctest runs it.

Ring mode (default): exports PLAN to the torch target with the test helper tool, starts WORLD
processes (torch.multiprocessing, localhost rendezvous on a free port); each builds the groups from
plan.json, takes its tokens with permute_tokens / position_ids, and runs a float64 causal ring
attention over the plan's hierarchical ring: K/V chunks travel along the exported level rings with
isend/irecv (for each outer step the outer hop is posted first and overlaps the whole inner ring),
and partial results merge with the online softmax (log-sum-exp). The outputs, restored to sequence
order with unpermute_tokens, must equal full causal attention computed on one process, and every
rank must meet every K/V chunk once, in the order of the planner's ring schedule. The gradient of a
weight every rank shares, reduced over the exported gradient-sync group, must equal the gradient of
the whole step. The same processes
run the TransformerEngine export's te_cp_setup.py with a stand-in attention module: the groups it
passes to set_context_parallel_group must hold the ranks of te_cp_groups.json (an all-reduce over
them checks the membership).

Loader mode (--loader-check): a plan for more ranks than the running world, and plan.json files
naming ranks that do not exist, must be rejected with a clear PlanError (also inside setup() in a
real world of WORLD processes, which must fail fast rather than hang).

Exit code 77 (ctest: skipped) only when torch cannot be imported.
"""
import argparse
import datetime
import json
import math
import os
import shutil
import socket
import subprocess
import sys

SKIP = 77
HEADS = 2
HEAD_DIM = 8
SEED = 20240611


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(rank, world, port):
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))


def import_module(export_dir):
    if export_dir not in sys.path:
        sys.path.insert(0, export_dir)
    import sparsering_plan

    return sparsering_plan


def make_inputs(seq_len):
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from test_seed import seed_for
    # Every rank draws the same inputs: SEED, or a seed drawn from SPARSERING_TEST_SEED when set.
    gen = torch.Generator().manual_seed(seed_for("torch_ring inputs", fixed=SEED))
    shape = (HEADS, seq_len, HEAD_DIM)  # (H, N, D)
    return [torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3)]


def full_causal_attention(q, k, v):
    import torch

    scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)  # (H, N, N)
    n = q.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (H, N, D)


class OnlineSoftmax:
    """Merges partial attention over K/V chunks with log-sum-exp, in float64."""

    def __init__(self, q, q_pos):
        import torch

        self.q = q  # (H, L, D)
        self.q_pos = q_pos  # (L,)
        self.out = torch.zeros_like(q)
        self.lse = torch.full(q.shape[:2], float("-inf"), dtype=q.dtype)  # (H, L)

    def add(self, k, v, k_pos):
        import torch

        scores = self.q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)  # (H, L, Lk)
        allowed = k_pos.view(1, -1) <= self.q_pos.view(-1, 1)  # causal by global position
        scores = scores.masked_fill(~allowed, float("-inf"))
        row_max = scores.amax(dim=-1)  # (H, L)
        safe_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
        p = torch.exp(scores - safe_max.unsqueeze(-1))
        row_sum = p.sum(dim=-1)
        chunk_lse = torch.where(row_sum > 0, torch.log(row_sum) + safe_max, torch.full_like(row_sum, float("-inf")))
        chunk_out = (p @ v) / torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum)).unsqueeze(-1)
        new_lse = torch.logaddexp(self.lse, chunk_lse)
        finite = torch.isfinite(new_lse)
        w_old = torch.where(finite, torch.exp(self.lse - new_lse), torch.zeros_like(new_lse))
        w_new = torch.where(finite, torch.exp(chunk_lse - new_lse), torch.zeros_like(new_lse))
        self.out = self.out * w_old.unsqueeze(-1) + chunk_out * w_new.unsqueeze(-1)
        self.lse = new_lse


def expected_sources(sizes, position):
    """The planner's schedule: at step t (mixed radix, inner digit fastest) position p holds the
    K/V of the position whose level digits are (p_l - t_l) mod s_l."""
    total = math.prod(sizes)
    sources = []
    for t in range(total):
        src, stride, p, s = 0, 1, position, t
        for size in sizes:
            src += ((p % size) - (s % size)) % size * stride
            p //= size
            s //= size
            stride *= size
        sources.append(src)
    return sources


class StandInAttention:
    """Records what te_cp_setup.py hands to a TransformerEngine attention module."""

    def __init__(self):
        self.calls = []

    def set_context_parallel_group(self, cp_group, cp_global_ranks, cp_stream, cp_comm_type="p2p"):
        self.calls.append((cp_group, list(cp_global_ranks), cp_stream, cp_comm_type))


def check_te_setup(rank, te_dir, ring_ranks):
    import torch
    import torch.distributed as dist

    if te_dir not in sys.path:
        sys.path.insert(0, te_dir)
    import te_cp_setup

    module = StandInAttention()
    group, ranks = te_cp_setup.setup_te_context_parallel([module])
    assert len(module.calls) == 1 and module.calls[0][3] == "p2p", module.calls
    spec = te_cp_setup.load_te_cp_groups(os.path.join(te_dir, "te_cp_groups.json"))
    assert ranks in [g["cp_global_ranks"] for g in spec["groups"]] and rank in ranks, (rank, ranks)
    # TE numbers ring positions by ascending global rank: the exported list is the ring, sorted.
    assert ranks == sorted(ring_ranks), (ranks, ring_ranks)
    total = torch.tensor([float(rank)], dtype=torch.float64)
    dist.all_reduce(total, group=group)
    assert total.item() == float(sum(ranks)), (rank, total.item(), ranks)


def check_grad_sync(plan, me, out_local, reference):
    """A weight shared by every rank: its gradient, reduced over the exported gradient-sync group,
    must be the gradient of the whole step (every ring's copy of the sequence)."""
    import torch
    import torch.distributed as dist

    assert me.grad_sync_ranks == list(range(plan.world_size)), me.grad_sync_ranks
    assert plan.grad_sync["collective"] in ("all_reduce", "reduce_scatter"), plan.grad_sync
    weight = torch.ones(HEAD_DIM, dtype=torch.float64, requires_grad=True)
    (out_local * weight).sum().backward()
    grad = weight.grad.clone()
    dist.all_reduce(grad, group=me.grad_sync_group)
    expected = reference.sum(dim=(0, 1)) * len(plan.rings)
    error = (grad - expected).abs().max().item()
    assert error < 1e-9, f"rank {me.rank}: reduced gradient differs by {error}"


def ring_worker(rank, world, port, export_dir, te_dir):
    import torch
    import torch.distributed as dist

    init(rank, world, port)
    sp = import_module(export_dir)
    plan = sp.load(os.path.join(export_dir, "plan.json"))
    me = plan.setup()
    assert me.rank == rank
    assert plan.head_parallel == 1, "this test drives context and data parallelism only"
    sizes = [level["size"] for level in plan.levels]
    # The neighbours are the level rings' successors and predecessors.
    for level, ring in enumerate(me.level_ranks):
        i = ring.index(rank)
        assert me.next[level] == ring[(i + 1) % len(ring)], (rank, level, me.next, ring)
        assert me.prev[level] == ring[(i - 1) % len(ring)], (rank, level, me.prev, ring)
    assert me.ring_ranks[me.cp_rank] == rank

    q, k, v = make_inputs(plan.seq_len_tokens)
    q_loc = plan.permute_tokens(q, me.cp_rank, dim=1)  # (H, L, D)
    k_loc = plan.permute_tokens(k, me.cp_rank, dim=1)
    v_loc = plan.permute_tokens(v, me.cp_rank, dim=1)
    pos = plan.position_ids(me.cp_rank)  # (L,)
    local = pos.numel()
    merge = OnlineSoftmax(q_loc, pos)
    met = []  # owner ring position of each chunk, in compute order

    def pack(chunk):
        kk, vv, kpos, owner = chunk
        return torch.cat([kk.reshape(-1), vv.reshape(-1), kpos.to(torch.float64), torch.tensor([float(owner)],
                                                                                                 dtype=torch.float64)])

    def unpack(buf):
        n = HEADS * local * HEAD_DIM
        kk = buf[:n].view(HEADS, local, HEAD_DIM)
        vv = buf[n:2 * n].view(HEADS, local, HEAD_DIM)
        kpos = buf[2 * n:2 * n + local].round().to(torch.long)
        return kk, vv, kpos, int(buf[-1].item())

    def visit(level, chunk):
        for step in range(sizes[level]):
            requests = []
            if step + 1 < sizes[level]:
                # Post this level's hop first: it overlaps everything below.
                send = pack(chunk)
                recv = torch.empty_like(send)
                requests = [dist.isend(send, me.next[level]), dist.irecv(recv, me.prev[level])]
            if level == 0:
                kk, vv, kpos, owner = chunk
                merge.add(kk, vv, kpos)
                met.append(owner)
            else:
                visit(level - 1, chunk)
            if requests:
                for request in requests:
                    request.wait()
                chunk = unpack(recv)

    visit(len(sizes) - 1, (k_loc, v_loc, pos, me.cp_rank))
    assert met == expected_sources(sizes, me.cp_rank), (rank, met, expected_sources(sizes, me.cp_rank))

    outputs = [torch.empty_like(merge.out) for _ in range(world)]
    dist.all_gather(outputs, merge.out.contiguous())
    reference = full_causal_attention(q, k, v)
    check_grad_sync(plan, me, merge.out.detach(), reference)
    if rank == 0:
        for ring_index, ring in enumerate(plan.rings):
            full = plan.unpermute_tokens([outputs[r] for r in ring], dim=1)
            error = (full - reference).abs().max().item()
            assert error < 1e-12, f"ring {ring_index}: max abs error {error}"
            print(f"ring {ring_index} {ring}: ring attention equals full causal attention "
                  f"(max abs error {error:.3g})", flush=True)
    check_te_setup(rank, te_dir, me.ring_ranks)
    dist.barrier()
    dist.destroy_process_group()


def loader_worker(rank, world, port, export_dir):
    init(rank, world, port)
    sp = import_module(export_dir)
    plan = sp.load(os.path.join(export_dir, "plan.json"))
    try:
        plan.setup()
    except sp.PlanError as error:
        message = str(error)
        assert f"needs {plan.world_size} ranks" in message and f"runs {world}" in message, message
        if rank == 0:
            print(f"setup() in a world of {world} rejected the plan: {message}", flush=True)
    else:
        raise AssertionError("setup() accepted a plan for another world size")
    import torch.distributed as dist

    dist.destroy_process_group()


def expect_plan_error(sp, doc, pieces, what):
    try:
        sp.Plan(doc, source="plan.json")
    except sp.PlanError as error:
        message = str(error)
        for piece in pieces:
            assert piece in message, f"{what}: message {message!r} lacks {piece!r}"
        print(f"{what}: rejected: {message}", flush=True)
        return
    raise AssertionError(f"{what}: accepted")


def loader_checks(export_dir, world):
    import copy

    import torch.multiprocessing as mp

    sp = import_module(export_dir)
    with open(os.path.join(export_dir, "plan.json"), encoding="utf-8") as f:
        doc = json.load(f)
    plan = sp.Plan(doc)
    plan_world = plan.world_size
    assert plan_world != world, "the loader check needs a plan for another world size"
    try:
        plan.check_world(world)
        raise AssertionError("check_world accepted a smaller world")
    except sp.PlanError as error:
        assert f"needs {plan_world} ranks" in str(error), str(error)

    bad = copy.deepcopy(doc)
    bad["rings"][0][1] = plan_world + 1
    expect_plan_error(sp, bad, [f"rank {plan_world + 1}", f"does not exist in a world of {plan_world}"],
                      "a ring naming a missing rank")
    bad = copy.deepcopy(doc)
    bad["ranks"][3]["neighbours"][0]["next"] = 99
    expect_plan_error(sp, bad, ["rank 99", "does not exist"], "a neighbour that does not exist")
    bad = copy.deepcopy(doc)
    bad["world_size"] = plan_world * 2
    expect_plan_error(sp, bad, ["world_size"], "a world size the degrees do not give")
    bad = copy.deepcopy(doc)
    bad["level_rings"][0][0] = list(reversed(bad["level_rings"][0][0]))
    bad["level_rings"][0][1] = bad["level_rings"][0][0]
    expect_plan_error(sp, bad, ["twice"], "a level ring repeated")
    try:
        plan.role(plan_world)
        raise AssertionError("role() accepted a missing rank")
    except sp.PlanError:
        pass
    mp.spawn(loader_worker, args=(world, free_port(), export_dir), nprocs=world, join=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export-tool", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--loader-check", action="store_true")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except Exception as error:  # pylint: disable=broad-except
        print(f"SKIPPED: torch cannot be imported by {sys.executable} ({error}); "
              "install it (Debian: apt-get install python3-torch)", flush=True)
        return SKIP
    if not dist.is_available() or not dist.is_gloo_available():
        print("FAILED: torch.distributed with the gloo backend is not available", flush=True)
        return 1

    shutil.rmtree(args.workdir, ignore_errors=True)
    export_dir = os.path.join(args.workdir, "export")
    te_dir = os.path.join(args.workdir, "te")
    os.makedirs(args.workdir)
    subprocess.run([args.export_tool, "torch", args.plan, export_dir], check=True)
    if args.loader_check:
        loader_checks(export_dir, args.world)
    else:
        subprocess.run([args.export_tool, "te", args.plan, te_dir], check=True)
        mp.spawn(ring_worker, args=(args.world, free_port(), export_dir, te_dir), nprocs=args.world, join=True)
    print("OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
