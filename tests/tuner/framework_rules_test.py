#!/usr/bin/env python3
"""Each framework export checked against the consuming framework's own rules.

The rules below are re-implemented from the frameworks' current sources (read, not imported: none
of them is installed here); each block names the upstream file and commit it follows. When a
framework changes one of these rules, update the block and its commit, and this test tells whether
the exports still fit.

- Megatron-LM (NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553):
  megatron/core/parallel_state.py (RankGenerator, generate_masked_orthogonal_rank_groups, order
  "tp-cp-ep-dp-pp", create_hierarchical_groups), megatron/training/arguments.py (the flags we write
  and validate_args' checks), megatron/core/transformer/transformer_config.py (cp_comm_type values,
  recompute rules), megatron/core/utils.py (_get_batch_on_this_cp_rank_per_sequence_balancing).
- TransformerEngine (NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b):
  transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py (p2p neighbours
  send_dst / recv_src from cp_global_ranks, a2a head split num_heads % cp_size), with
  torch.distributed group ranks in ascending global-rank order.
- torchtitan (pytorch/torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a): torchtitan/config/configs.py
  (ParallelismConfig, TrainingConfig: slots dataclasses, so an unknown field cannot be set),
  torchtitan/distributed/activation_checkpoint.py (SelectiveAC / FullAC / None),
  torchtitan/distributed/parallel_dims.py (degrees multiply to the world),
  torchtitan/distributed/context_parallel/api.py (CP needs spmd_backend "spmd_types"); and v0.2.2
  (73a0e6979dd10b6b1904098eb3c8f62c18ab87ce) torchtitan/config/job_config.py for the TOML form.
- MTraining (microsoft/MInference branch wenxuan/mtrain, f74982d3f46d32d1a421a102c187b6ba2da434cd):
  mtraining/train.py (attention config keys, pattern config path), mtraining/attn_funcs/minfer_func.py
  (implementations), minference/ops/op_utils/vertical_slash_utils.py (calc_index's flex budgets).

Exit code 77 (ctest: skipped) when numpy, yaml or tomllib cannot be imported.
"""
import argparse
import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import types

SKIP = 77
try:
    import numpy as np
    import tomllib
    import yaml
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"skipped: {error}")
    sys.exit(SKIP)

FAILURES = []
CHECKS = [0]


def check(condition, message):
    CHECKS[0] += 1
    if not condition:
        FAILURES.append(message)


# --- plans ----------------------------------------------------------------------------------------
def plan_yaml(name, source, cluster, seq, cp, hp, dp, levels, layout="zigzag", order=None, comm="p2p",
              recompute="none", zero=0, granularity=None, recall=0.95):
    lines = [f"name: {name}", f"model: {source}/configs/models/qwen2.5-3b.yaml",
             f"cluster: {source}/tests/tuner/data/clusters/{cluster}.yaml", f"seq_len_tokens: {seq}",
             f"context_parallel: {cp}", f"head_parallel: {hp}", f"data_parallel: {dp}", "ring:", "  levels:"]
    lines += [f"    - {{size: {size}, link: {link}}}" for size, link in levels]
    if order:
        lines.append(f"  order: [{', '.join(map(str, order))}]")
    lines += ["layout:", f"  kind: {layout}"]
    if granularity:
        lines.append(f"  granularity_tokens: {granularity}")
    lines += ["sparse:", "  last_q: 64", f"  recall: {recall}", f"comm: {comm}", f"recompute: {recompute}",
              f"zero_stage: {zero}"]
    return "\n".join(lines) + "\n"


def plans(source):
    return {
        # one replica pair of flat rings of 4 (within a node), ZeRO-1, full recompute
        "cp4-dp2": plan_yaml("cp4-dp2", source, "test-2x4", 256, 4, 1, 2, [(4, "nvlink")], zero=1,
                             recompute="full"),
        # head parallel 2 (= the model's K/V heads) x rings of 2 x 2 replicas
        "hp2-cp2-dp2": plan_yaml("hp2-cp2-dp2", source, "test-2x4", 256, 2, 2, 2, [(2, "nvlink")],
                                 recompute="selective"),
        # head parallel 2 x a ring of 4 across both nodes whose order Megatron and TE renumber
        "hp2-cp4-hier": plan_yaml("hp2-cp4-hier", source, "test-2x4", 256, 4, 2, 1,
                                  [(2, "nvlink"), (2, "infiniband")], layout="striped", granularity=8,
                                  order=[0, 2, 4, 6, 1, 3, 5, 7]),
        # a striped hierarchical ring of 8 at recall 0.90 (MInference ships this flex config)
        "cp8-striped": plan_yaml("cp8-striped", source, "test-2x4", 512, 8, 1, 1, [(4, "nvlink"), (2, "infiniband")],
                                 layout="striped", granularity=16, recall=0.90, order=[0, 2, 1, 3, 4, 6, 5, 7]),
        # head parallel 4 over the model's 2 K/V heads: the simulator replicates them, a2a cannot
        "hp4-cp2": plan_yaml("hp4-cp2", source, "test-2x4", 256, 2, 4, 1, [(2, "nvlink")]),
    }


def export(tool, target, plan_path, out, *options):
    if os.path.isdir(out):
        shutil.rmtree(out)
    return subprocess.run([tool, target, plan_path, out, *options], capture_output=True, text=True)


def plan_roles(tool, plan_path, workdir):
    """The plan's own roles per global rank (the torch export carries them exactly)."""
    out = os.path.join(workdir, "roles")
    result = export(tool, "torch", plan_path, out)
    assert result.returncode == 0, result.stderr
    with open(os.path.join(out, "plan.json"), encoding="utf-8") as f:
        return json.load(f)


def framework_to_plan_gpu(out, world):
    path = os.path.join(out, "rank_map.json")
    if not os.path.exists(path):
        return list(range(world))
    with open(path, encoding="utf-8") as f:
        return json.load(f)["plan_gpu_of_rank"]


def check_flat_rings(name, framework, successor, gpu_of, plan):
    """The framework's ring successor of every rank must be the plan's next ring position (rings
    flattened in position order), once framework ranks run on the plan GPUs rank_map.json names."""
    roles = plan["ranks"]
    cp = plan["context_parallel"]
    for f, nxt in successor.items():
        me, other = roles[gpu_of[f]], roles[gpu_of[nxt]]
        check(other["ring"] == me["ring"] and other["cp_rank"] == (me["cp_rank"] + 1) % cp,
              f"{name}: {framework} rank {f} sends K/V to rank {nxt}, which runs ring {other['ring']} position "
              f"{other['cp_rank']}, not ring {me['ring']} position {(me['cp_rank'] + 1) % cp}")


# --- Megatron-LM ----------------------------------------------------------------------------------
# megatron/core/parallel_state.py: generate_masked_orthogonal_rank_groups and RankGenerator.get_ranks.
def megatron_rank_groups(world, parallel_size, mask):
    def prefix_product(values):
        out = [1]
        for v in values:
            out.append(out[-1] * v)
        return out

    def decompose(index, shape):
        stride = prefix_product(shape)
        return [(index // d) % s for s, d in zip(shape, stride)]

    masked_shape = [s for s, m in zip(parallel_size, mask) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask) if not m]
    stride = prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(stride, mask) if m]
    unmasked_stride = [d for d, m in zip(stride, mask) if not m]
    group_size = prefix_product(masked_shape)[-1]
    groups = []
    for group_index in range(world // group_size):
        base = sum(i * s for i, s in zip(decompose(group_index, unmasked_shape), unmasked_stride))
        groups.append([base + sum(i * s for i, s in zip(decompose(r, masked_shape), masked_stride))
                       for r in range(group_size)])
    return groups


def megatron_get_ranks(order, sizes, token, world):
    names = order.split("-")
    return megatron_rank_groups(world, [sizes[n] for n in names], [n in token.split("-") for n in names])


# create_hierarchical_groups: einops "(l s u) -> (l u) s" with u = prod(sizes[:level]), s = sizes[level].
def megatron_hierarchical_groups(ranks, sizes):
    levels = []
    for level, s in enumerate(sizes):
        u = int(np.prod(sizes[:level]))
        arr = np.array(ranks).reshape(-1, s, u).transpose(0, 2, 1).reshape(-1, s)
        levels.append(arr.tolist())
    return levels


# The flags of megatron/training/arguments.py (hand-written or generated from the config dataclasses
# by ArgumentGroupFactory: field name with '-' for '_') that the export writes, with their values.
MEGATRON_FLAGS = {
    "--tensor-model-parallel-size": ("int", None),       # ModelParallelConfig.tensor_model_parallel_size
    "--pipeline-model-parallel-size": ("int", None),     # ModelParallelConfig.pipeline_model_parallel_size
    "--context-parallel-size": ("int", None),            # ModelParallelConfig.context_parallel_size
    "--hierarchical-context-parallel-sizes": ("ints", None),
    "--cp-comm-type": ("strs", {"p2p", "all_gather", "a2a", "a2a+p2p"}),  # TransformerConfig.cp_comm_type
    "--seq-length": ("int", None),
    "--micro-batch-size": ("int", None),                 # TrainingConfig.micro_batch_size
    "--recompute-granularity": ("str", {"full", "selective"}),
    "--recompute-method": ("str", {"uniform", "block"}),
    "--recompute-num-layers": ("int", None),
    "--use-distributed-optimizer": ("flag", None),
}


def parse_megatron_args(text):
    body = text.split("SPARSERING_MEGATRON_ARGS=(", 1)[1].split("\n)", 1)[0]
    tokens = shlex.split(body, comments=True)
    args, i = {}, 0
    while i < len(tokens):
        flag = tokens[i]
        assert flag in MEGATRON_FLAGS, f"{flag} is not a Megatron-LM argument"
        kind, choices = MEGATRON_FLAGS[flag]
        i += 1
        values = []
        while kind != "flag" and i < len(tokens) and not tokens[i].startswith("--"):
            values.append(tokens[i])
            i += 1
        if kind == "flag":
            args[flag] = True
            continue
        assert values, f"{flag} needs a value"
        if kind in ("int", "str"):
            assert len(values) == 1, f"{flag} takes one value, got {values}"
        parsed = [int(v) for v in values] if kind in ("int", "ints") else values
        for v in parsed:
            assert choices is None or v in choices, f"{flag} {v} is not one of {sorted(choices)}"
        args[flag] = parsed[0] if kind in ("int", "str") else parsed
    return args


def check_megatron(name, tool, plan_path, workdir, plan):
    out = os.path.join(workdir, f"megatron-{name}")
    result = export(tool, "megatron", plan_path, out)
    kv_heads = plan["attention_heads"]["kv_heads"]
    if plan["head_parallel"] > 1 and kv_heads % plan["head_parallel"] != 0:
        check(result.returncode == 2 and "K/V heads" in result.stderr,
              f"{name}: megatron export of head_parallel {plan['head_parallel']} over {kv_heads} K/V heads must "
              f"be refused with exit 2, got {result.returncode}: {result.stderr}")
        return
    check(result.returncode == 0, f"{name}: megatron export failed: {result.stderr}")
    if result.returncode != 0:
        return
    with open(os.path.join(out, "megatron_args.sh"), encoding="utf-8") as f:
        args = parse_megatron_args(f.read())
    world = plan["world_size"]
    tp, pp, cp = args["--tensor-model-parallel-size"], args["--pipeline-model-parallel-size"], args["--context-parallel-size"]
    # validate_args: the world divides into tp x pp x cp; sequence split 2 x cp; a2a+p2p needs
    # hierarchical sizes whose product is cp.
    check(world % (tp * pp * cp) == 0, f"{name}: world {world} is not a multiple of tp x pp x cp")
    dp = world // (tp * pp * cp)
    check(cp == 1 or args["--seq-length"] % (2 * cp) == 0, f"{name}: seq-length not a multiple of 2 x cp")
    comm = args["--cp-comm-type"]
    check(len(comm) == 1, f"{name}: one cp-comm-type for every layer expected, got {comm}")
    hierarchical = args.get("--hierarchical-context-parallel-sizes")
    if "a2a+p2p" in comm:
        check(hierarchical is not None, f"{name}: a2a+p2p without --hierarchical-context-parallel-sizes")
    if hierarchical:
        check(int(np.prod(hierarchical)) == cp, f"{name}: hierarchical sizes {hierarchical} do not multiply to {cp}")
    # TransformerConfig.__post_init__: full recompute needs a method and a layer count; selective none.
    granularity = args.get("--recompute-granularity")
    if granularity == "full":
        check("--recompute-method" in args and "--recompute-num-layers" in args,
              f"{name}: full recompute needs --recompute-method and --recompute-num-layers")
    if granularity == "selective":
        check("--recompute-num-layers" not in args, f"{name}: selective recompute takes no layer count")
    # RankGenerator(order "tp-cp-ep-dp-pp"): the CP groups, and inside them the hierarchical groups
    # (level 0 = a2a, level 1 = p2p); TE then finds the ring neighbours as in check_te.
    sizes = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    ring = hierarchical is not None or comm == ["p2p"]
    successor = {}
    for ranks in megatron_get_ranks("tp-cp-ep-dp-pp", sizes, "cp", world):
        if hierarchical:
            a2a_groups, p2p_groups = megatron_hierarchical_groups(ranks, hierarchical)
            successor.update(te_successors(ranks, a2a_groups, p2p_groups))
        elif ring:
            successor.update(te_successors(ranks, [[r] for r in ranks], [ranks]))
    # _get_batch_on_this_cp_rank_per_sequence_balancing: CP rank c holds chunks c and 2 x cp - 1 - c.
    perm = np.load(os.path.join(out, "token_permutation.npy"))
    seq = args["--seq-length"]
    chunk = seq // (2 * cp)
    for c in range(cp):
        expected = list(range(c * chunk, (c + 1) * chunk)) + list(range((2 * cp - 1 - c) * chunk, (2 * cp - c) * chunk))
        check(perm[c].tolist() == expected, f"{name}: token_permutation row {c} is not Megatron's zigzag split")
    if ring:
        check_flat_rings(name, "Megatron-LM", successor, framework_to_plan_gpu(out, world), plan)


# --- TransformerEngine ----------------------------------------------------------------------------
def te_successors(cp_global_ranks, a2a_groups, p2p_groups):
    """AttnFuncWithCPAndKVP2P.forward: rank / rank_a2a are this rank's ranks in its p2p and a2a
    groups (torch.distributed: position in the ascending member list); K/V goes to
    cp_global_ranks[(rank + 1) % cp_size * cp_size_a2a + rank_a2a]."""
    successor = {}
    a2a_size = len(a2a_groups[0])
    for me in cp_global_ranks:
        a2a = next(g for g in a2a_groups if me in g)
        p2p = next(g for g in p2p_groups if me in g)
        rank_a2a, rank = sorted(a2a).index(me), sorted(p2p).index(me)
        cp_size = len(p2p)
        check(cp_global_ranks[rank * a2a_size + rank_a2a] == me,
              f"rank {me} is not at cp_global_ranks[{rank * a2a_size + rank_a2a}] where TE looks for it")
        send_dst = cp_global_ranks[(rank + 1) % cp_size * a2a_size + rank_a2a]
        recv_src = cp_global_ranks[(rank - 1) % cp_size * a2a_size + rank_a2a]
        successor[me] = send_dst
        check(recv_src != me or cp_size == 1, f"rank {me} receives from itself")
    for me, nxt in successor.items():
        check(list(successor.values()).count(nxt) == 1, f"two ranks send K/V to rank {nxt}")
    return successor


def check_te(name, tool, plan_path, workdir, plan):
    out = os.path.join(workdir, f"te-{name}")
    result = export(tool, "te", plan_path, out)
    kv_heads = plan["attention_heads"]["kv_heads"]
    if plan["head_parallel"] > 1 and kv_heads % plan["head_parallel"] != 0:
        check(result.returncode == 2 and "K/V heads" in result.stderr,
              f"{name}: te export of head_parallel {plan['head_parallel']} over {kv_heads} K/V heads must be "
              f"refused with exit 2, got {result.returncode}: {result.stderr}")
        return
    check(result.returncode == 0, f"{name}: te export failed: {result.stderr}")
    if result.returncode != 0:
        return
    with open(os.path.join(out, "te_cp_groups.json"), encoding="utf-8") as f:
        spec = json.load(f)
    comm = spec["cp_comm_type"]
    check(comm in ("p2p", "all_gather", "a2a", "a2a+p2p"), f"{name}: cp_comm_type {comm} is not TE's")
    a2a_size = spec["a2a_size"]
    # context_parallel.py (a2a): num_heads % cp_size == 0 for Q, K and V, the K/V heads included.
    check(kv_heads % a2a_size == 0 and plan["attention_heads"]["q_heads"] % a2a_size == 0,
          f"{name}: TE's a2a over {a2a_size} ranks cannot split {kv_heads} K/V heads")
    successor = {}
    for entry in spec["groups"]:
        ranks = entry["cp_global_ranks"]
        if comm == "a2a+p2p":
            check(len(entry["a2a_groups"][0]) == a2a_size, f"{name}: a2a groups are not of a2a_size")
            successor.update(te_successors(ranks, entry["a2a_groups"], entry["p2p_groups"]))
        elif comm == "p2p":
            successor.update(te_successors(ranks, [[r] for r in ranks], [ranks]))
    if comm in ("p2p", "a2a+p2p"):
        check_flat_rings(name, "TransformerEngine", successor, framework_to_plan_gpu(out, spec["world_size"]), plan)


# --- torchtitan -----------------------------------------------------------------------------------
# torchtitan/config/configs.py: field names of ParallelismConfig and TrainingConfig (defaults as upstream).
@dataclasses.dataclass(kw_only=True, slots=True)
class ParallelismConfig:
    data_parallel_replicate_degree: int = 1
    data_parallel_shard_degree: int = -1
    fsdp_reshard_after_forward: str = "default"
    enable_fsdp_symm_mem: bool = False
    tensor_parallel_degree: int = 1
    enable_sequence_parallel: bool = True
    spmd_backend: str = "spmd_types"
    pipeline_parallel_degree: int = 1
    module_fqns_per_model_part: object = None
    pipeline_parallel_first_stage_less_layers: int = 1
    pipeline_parallel_last_stage_less_layers: int = 1
    pipeline_parallel_layers_per_stage: object = None
    pipeline_parallel_schedule: str = "1F1B"
    pipeline_parallel_schedule_csv: object = ""
    num_pp_microbatches: int = 1
    context_parallel_degree: int = 1
    context_parallel_load_balancer: object = "headtail"
    context_parallel_ptrr_mask_key: object = None
    expert_parallel_degree: int = 1


@dataclasses.dataclass(kw_only=True, slots=True)
class TrainingConfig:
    num_tokens_per_microbatch_per_dp_rank: int = 16384
    num_tokens_per_train_step: int = -1
    max_context_length: int = 2048
    max_norm: float = 1.0
    steps: int = 10000
    enable_cpu_offload: bool = False
    disable_cuda_graphs: bool = False


@dataclasses.dataclass(kw_only=True, slots=True)
class TrainerConfig:  # the part of torchtitan/trainer.py Trainer.Config the export touches
    parallelism: ParallelismConfig = dataclasses.field(default_factory=ParallelismConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)
    activation_checkpoint: object = None


def install_activation_checkpoint_stub():
    """torchtitan.distributed.activation_checkpoint with its three policies' Config classes."""
    module = types.ModuleType("torchtitan.distributed.activation_checkpoint")
    for policy in ("SelectiveAC", "FullAC", "MemoryBudgetAC"):
        config = dataclasses.make_dataclass("Config", [], kw_only=True, slots=True)
        setattr(module, policy, type(policy, (), {"Config": config}))
    for name in ("torchtitan", "torchtitan.distributed"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["torchtitan.distributed.activation_checkpoint"] = module
    return module


def check_torchtitan(name, tool, plan_path, workdir, plan):
    out = os.path.join(workdir, f"torchtitan-{name}")
    result = export(tool, "torchtitan", plan_path, out)
    check(result.returncode == 0, f"{name}: torchtitan export failed: {result.stderr}")
    if result.returncode != 0:
        return
    ac = install_activation_checkpoint_stub()
    namespace = {}
    with open(os.path.join(out, "torchtitan_config.py"), encoding="utf-8") as f:
        code = f.read()
    exec(compile(code, "torchtitan_config.py", "exec"), namespace)
    config = TrainerConfig()
    try:
        config = namespace["apply_sparsering_plan"](config)
    except AttributeError as error:  # slots: a field torchtitan does not have
        check(False, f"{name}: torchtitan_config.py sets a field torchtitan's config lacks: {error}")
        return
    p, t = config.parallelism, config.training
    # ParallelismConfig.__post_init__ and ParallelDims._validate.
    check(p.context_parallel_load_balancer in ("headtail", "ptrr", None), f"{name}: unknown load balancer")
    check(p.spmd_backend in ("partial_dtensor", "spmd_types"), f"{name}: bad spmd_backend")
    degrees = [p.data_parallel_replicate_degree, p.data_parallel_shard_degree, p.context_parallel_degree,
               p.tensor_parallel_degree, p.pipeline_parallel_degree]
    check(all(d >= 1 for d in degrees), f"{name}: degrees {degrees} must be >= 1")
    check(int(np.prod(degrees)) == namespace["WORLD_SIZE"] == plan["world_size"],
          f"{name}: torchtitan degrees {degrees} do not multiply to the world {plan['world_size']}")
    # validate_cp_backend: context parallelism needs the spmd_types backend.
    check(p.context_parallel_degree == 1 or p.spmd_backend == "spmd_types", f"{name}: CP without spmd_types")
    check(p.context_parallel_degree == plan["context_parallel"] * plan["head_parallel"], f"{name}: cp degree")
    # TrainingConfig: one micro-batch of micro_batch_sequences whole sequences per data-parallel rank.
    check(t.max_context_length == plan["seq_len_tokens"], f"{name}: max_context_length")
    check(t.num_tokens_per_microbatch_per_dp_rank == plan["seq_len_tokens"] * plan["micro_batch_sequences"],
          f"{name}: num_tokens_per_microbatch_per_dp_rank")
    check(config.activation_checkpoint is None or isinstance(
        config.activation_checkpoint, (ac.SelectiveAC.Config, ac.FullAC.Config, ac.MemoryBudgetAC.Config)),
        f"{name}: activation_checkpoint must be a policy Config or None")
    check(namespace["TORCHTITAN_COMMIT"] == "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a", f"{name}: commit")

    # v0.2.2 torchtitan/config/job_config.py: the TOML keys and their Literal values.
    out = os.path.join(workdir, f"torchtitan-toml-{name}")
    result = export(tool, "torchtitan", plan_path, out, "--torchtitan-format", "toml-v0.2")
    check(result.returncode == 0, f"{name}: torchtitan toml export failed: {result.stderr}")
    if result.returncode != 0:
        return
    with open(os.path.join(out, "torchtitan.toml"), "rb") as f:
        doc = tomllib.load(f)
    v02 = {"parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                           "pipeline_parallel_degree", "context_parallel_degree", "context_parallel_rotate_method",
                           "context_parallel_load_balancer"},
           "training": {"seq_len", "local_batch_size"}, "activation_checkpoint": {"mode"}}
    for section, keys in doc.items():
        check(section in v02 and set(keys) <= v02[section], f"{name}: v0.2 TOML section {section} keys {set(keys)}")
    check(doc["parallelism"]["context_parallel_rotate_method"] in ("allgather", "alltoall"), f"{name}: rotate")
    check(doc["activation_checkpoint"]["mode"] in ("selective", "full", "memory_budget", "none"), f"{name}: ac mode")


# --- MTraining ------------------------------------------------------------------------------------
def check_mtraining(name, tool, plan_path, workdir, plan):
    out = os.path.join(workdir, f"mtraining-{name}")
    result = export(tool, "mtraining", plan_path, out)
    check(result.returncode == 0, f"{name}: mtraining export failed: {result.stderr}")
    if result.returncode != 0:
        return
    with open(os.path.join(out, "mtraining_attn.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)  # train.py load_train_attn_config
    # MInferModel.__init__ pops these keys; the rest go to MInference(...) as keyword arguments.
    check(set(config) <= {"granularity", "implementation", "attn_type", "pattern_config_name"},
          f"{name}: mtraining_attn.yaml keys {set(config)}")
    check(config["implementation"] in ("default", "stripe", "zigzag", "dr_stripe"),
          f"{name}: implementation {config['implementation']} is not in MINFER_IMPLEMENTATIONS")
    path = os.path.join(out, "minference_configs", config["pattern_config_name"] + ".json")
    check(os.path.exists(path), f"{name}: the pattern config {config['pattern_config_name']}.json is not exported")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        layers = json.load(f)
    heads = plan["attention_heads"]["q_heads"]
    check(isinstance(layers, list) and len(layers) == 36, f"{name}: one pattern object per layer (36)")
    for index, layer in enumerate(layers):
        pattern = {int(k): v for k, v in layer.items()}  # MInferAttnFunc.get_pattern_dict
        check(sorted(pattern) == list(range(heads)), f"{name}: layer {index} does not list heads 0 .. {heads - 1}")
        v_size = [pattern[h][1] for h in range(heads)]
        s_size = [pattern[h][2] for h in range(heads)]
        # calc_index: flex mode when every budget is a [p, size] list.
        check(all(isinstance(x, list) and len(x) == 2 for x in v_size + s_size),
              f"{name}: layer {index} budgets are not flex [p, size] pairs")
        check(all(x[0] == v_size[0][0] and 0 < x[0] <= 1 and isinstance(x[1], int) for x in v_size + s_size),
              f"{name}: layer {index} budgets are not one recall with integer caps")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--export-tool", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    for name, text in plans(args.source_dir).items():
        plan_path = os.path.join(args.workdir, f"{name}.yaml")
        with open(plan_path, "w", encoding="utf-8") as f:
            f.write(text)
        plan = plan_roles(args.export_tool, plan_path, args.workdir)
        for check_target in (check_megatron, check_te, check_torchtitan, check_mtraining):
            try:
                check_target(name, args.export_tool, plan_path, args.workdir, plan)
            except AssertionError as error:
                FAILURES.append(f"{name}: {check_target.__name__}: {error}")
    for failure in FAILURES:
        print("FAIL:", failure)
    print(f"{CHECKS[0]} checks, {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
