"""Applies a sparsering context-parallel plan (plan.json) to torch.distributed.

`sparsering export PLAN --to torch --out DIR` writes plan.json and a copy of this module into DIR.
The module checks plan.json against the running world, builds the process groups (context-parallel
rings, the rings of every hierarchy level, head-parallel, data-parallel and gradient-synchronisation
groups), gives every rank its ring neighbours per level and its query and K/V heads, and applies the
plan's token layout to data:

    import torch.distributed as dist
    import sparsering_plan

    dist.init_process_group("nccl")
    plan = sparsering_plan.load("plan.json")
    me = plan.setup()                 # on every rank: builds every group in the same order
    me.cp_rank, me.ring_group, me.level_groups[l], me.prev[l], me.next[l]
    me.q_heads, me.kv_heads           # [first, end) of the heads this rank attends with
    q_local = plan.permute_tokens(q, me.cp_rank, dim=1)
    ...
    for p in model.parameters():      # gradients: reduce over the ranks that share the weights
        dist.all_reduce(p.grad, group=me.grad_sync_group)
    positions = plan.position_ids(me.cp_rank)

Ring conventions (as in the planner): ring positions decompose over the levels, inner first,
p = i0 + s0 * (i1 + s1 * ...); a hop of level l goes from a position to the one whose level-l
index is one higher (cyclically). K/V moves from `prev[l]` to this rank and from this rank to
`next[l]`. The gradient-synchronisation group holds the ranks that compute gradients of the same
parameters: every rank, since plans have neither tensor nor pipeline parallelism and head-parallel
ranks run the whole layer on their own tokens (`grad_sync["collective"]` says whether the plan's ZeRO
stage keeps whole gradients, all_reduce, or shards them, reduce_scatter). Source: tuner/python/sparsering_plan.py of sparsering; tested in real torch.distributed
by tests/tuner/torch_ring_test.py.
"""

import json

FORMAT = "sparsering-torch-plan"
VERSION = 2


class PlanError(ValueError):
    """plan.json is malformed or does not fit the running torch.distributed world."""


def _require(condition, message):
    if not condition:
        raise PlanError(message)


def _int(value, where):
    _require(isinstance(value, int) and not isinstance(value, bool), f"{where} must be an integer, got {value!r}")
    return value


def _rank_list(value, where, world):
    _require(isinstance(value, list), f"{where} must be a list of ranks, got {type(value).__name__}")
    for i, rank in enumerate(value):
        if not (isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < world):
            _int(rank, f"{where}[{i}]")
            raise PlanError(f"{where}[{i}] is rank {rank}, which does not exist in a world of {world} ranks "
                            f"(0 .. {world - 1})")
    return value


class RankView:
    """What one rank needs: its role, its groups and its ring neighbours per level."""

    def __init__(self, plan, rank):
        role = plan.role(rank)
        self.rank = rank
        self.ring = role["ring"]
        self.cp_rank = role["cp_rank"]
        self.head_index = role["head_index"]
        self.replica = role["replica"]
        self.level_index = list(role["level_index"])
        self.prev = [n["prev"] for n in role["neighbours"]]
        self.next = [n["next"] for n in role["neighbours"]]
        self.ring_ranks = plan.rings[self.ring]
        self.level_ranks = [next(g for g in rings if rank in g) for rings in plan.level_rings]
        self.head_ranks = next(g for g in plan.head_parallel_groups if rank in g)
        self.data_parallel_ranks = next(g for g in plan.data_parallel_groups if rank in g)
        self.grad_sync_ranks = next(g for g in plan.grad_sync_groups if rank in g)
        self.q_heads = tuple(role["heads"]["q"])
        self.kv_heads = tuple(role["heads"]["kv"])
        self.ring_group = None
        self.level_groups = [None] * len(self.level_ranks)
        self.head_group = None
        self.data_parallel_group = None
        self.grad_sync_group = None

    def __repr__(self):
        return (f"RankView(rank={self.rank}, ring={self.ring}, cp_rank={self.cp_rank}, "
                f"head_index={self.head_index}, replica={self.replica}, prev={self.prev}, next={self.next})")


class Plan:
    """A checked plan.json."""

    def __init__(self, doc, source="plan.json"):
        self.source = source
        _require(isinstance(doc, dict), f"{source}: must hold a JSON object")
        _require(doc.get("format") == FORMAT, f"{source}: format must be {FORMAT!r}, got {doc.get('format')!r}")
        _require(doc.get("version") == VERSION, f"{source}: version {doc.get('version')!r} is not supported "
                                                f"(this module reads version {VERSION})")
        self.name = doc.get("plan", "plan")
        self.world_size = _int(doc.get("world_size"), f"{source}: world_size")
        self.context_parallel = _int(doc.get("context_parallel"), f"{source}: context_parallel")
        self.head_parallel = _int(doc.get("head_parallel"), f"{source}: head_parallel")
        self.data_parallel = _int(doc.get("data_parallel"), f"{source}: data_parallel")
        self.seq_len_tokens = _int(doc.get("seq_len_tokens"), f"{source}: seq_len_tokens")
        world = self.world_size
        _require(world >= 1 and world == self.context_parallel * self.head_parallel * self.data_parallel,
                 f"{source}: world_size {world} must equal context_parallel x head_parallel x data_parallel = "
                 f"{self.context_parallel} x {self.head_parallel} x {self.data_parallel}")
        self.levels = doc.get("levels")
        _require(isinstance(self.levels, list) and self.levels, f"{source}: levels must be a non-empty list")
        product = 1
        for i, level in enumerate(self.levels):
            _require(isinstance(level, dict), f"{source}: levels[{i}] must be an object")
            size = _int(level.get("size"), f"{source}: levels[{i}].size")
            _require(size >= 1, f"{source}: levels[{i}].size must be >= 1, got {size}")
            product *= size
        _require(product == self.context_parallel,
                 f"{source}: level sizes multiply to {product}, not context_parallel {self.context_parallel}")
        self.layout = doc.get("layout", {})

        self.rings = self._groups(doc, "rings", self.head_parallel * self.data_parallel, self.context_parallel)
        self.level_rings = doc.get("level_rings")
        _require(isinstance(self.level_rings, list) and len(self.level_rings) == len(self.levels),
                 f"{source}: level_rings must hold one list of rings per level")
        for l, rings in enumerate(self.level_rings):
            size = self.levels[l]["size"]
            _require(isinstance(rings, list) and len(rings) == world // size,
                     f"{source}: level_rings[{l}] must hold {world // size} rings of {size}")
            for i, ring in enumerate(rings):
                _rank_list(ring, f"{source}: level_rings[{l}][{i}]", world)
                _require(len(ring) == size, f"{source}: level_rings[{l}][{i}] has {len(ring)} ranks, not {size}")
            self._check_partition(rings, f"{source}: level_rings[{l}]")
        self.head_parallel_groups = self._groups(doc, "head_parallel_groups",
                                                 self.context_parallel * self.data_parallel, self.head_parallel)
        self.data_parallel_groups = self._groups(doc, "data_parallel_groups",
                                                 self.context_parallel * self.head_parallel, self.data_parallel)
        self.grad_sync_groups = self._groups(doc, "grad_sync_groups", 1, world)
        self.grad_sync = doc.get("grad_sync")
        _require(isinstance(self.grad_sync, dict)
                 and self.grad_sync.get("collective") in ("all_reduce", "reduce_scatter"),
                 f"{source}: grad_sync must be an object whose collective is all_reduce or reduce_scatter")
        heads = doc.get("attention_heads")
        _require(isinstance(heads, dict), f"{source}: attention_heads must be an object")
        q_heads = _int(heads.get("q_heads"), f"{source}: attention_heads.q_heads")
        kv_heads = _int(heads.get("kv_heads"), f"{source}: attention_heads.kv_heads")
        self.attention_heads = heads

        ranks = doc.get("ranks")
        _require(isinstance(ranks, list) and len(ranks) == world, f"{source}: ranks must list all {world} ranks")
        self._roles = []
        for g, role in enumerate(ranks):
            _require(isinstance(role, dict) and role.get("rank") == g, f"{source}: ranks[{g}] must describe rank {g}")
            ring = _int(role.get("ring"), f"{source}: ranks[{g}].ring")
            cp_rank = _int(role.get("cp_rank"), f"{source}: ranks[{g}].cp_rank")
            _require(0 <= ring < len(self.rings) and 0 <= cp_rank < self.context_parallel
                     and self.rings[ring][cp_rank] == g,
                     f"{source}: ranks[{g}] says ring {ring} position {cp_rank}, but rings[] do not hold rank {g} there")
            token_slice = role.get("token_slice")
            _require(isinstance(token_slice, list) and len(token_slice) == 2,
                     f"{source}: ranks[{g}].token_slice must be [start, end]")
            start, end = token_slice
            _int(start, f"{source}: ranks[{g}].token_slice[0]")
            _int(end, f"{source}: ranks[{g}].token_slice[1]")
            local = self.seq_len_tokens // self.context_parallel
            _require(0 <= start <= end <= local, f"{source}: ranks[{g}].token_slice [{start}, {end}) is outside "
                                                 f"the {local} tokens of a ring position")
            role_heads = role.get("heads")
            _require(isinstance(role_heads, dict), f"{source}: ranks[{g}].heads must be an object")
            for key, count in (("q", q_heads), ("kv", kv_heads)):
                span = role_heads.get(key)
                _require(isinstance(span, list) and len(span) == 2
                         and all(isinstance(x, int) and not isinstance(x, bool) for x in span)
                         and 0 <= span[0] < span[1] <= count,
                         f"{source}: ranks[{g}].heads.{key} must be [first, end) within the {count} heads, "
                         f"got {span!r}")
            neighbours = role.get("neighbours")
            _require(isinstance(neighbours, list) and len(neighbours) == len(self.levels),
                     f"{source}: ranks[{g}].neighbours must hold one entry per level")
            for l, n in enumerate(neighbours):
                _require(isinstance(n, dict), f"{source}: ranks[{g}].neighbours[{l}] must be an object")
                _rank_list([n.get("prev"), n.get("next")], f"{source}: ranks[{g}].neighbours[{l}] (prev, next)", world)
            self._roles.append(role)
        for g, role in enumerate(self._roles):
            for l, n in enumerate(role["neighbours"]):
                _require(self._roles[n["next"]]["neighbours"][l]["prev"] == g,
                         f"{source}: rank {g}'s level-{l} successor {n['next']} does not name it as predecessor")

        perm = doc.get("token_permutation")
        _require(isinstance(perm, list) and len(perm) == self.context_parallel,
                 f"{source}: token_permutation must hold one row per context-parallel rank ({self.context_parallel})")
        local = self.seq_len_tokens // self.context_parallel
        seen = bytearray(self.seq_len_tokens)
        for r, row in enumerate(perm):
            _require(isinstance(row, list) and len(row) == local,
                     f"{source}: token_permutation[{r}] must hold {local} token indices")
            for token in row:
                if not (isinstance(token, int) and 0 <= token < self.seq_len_tokens and not seen[token]):
                    raise PlanError(f"{source}: token_permutation[{r}] holds {token!r}, not a new token of 0 .. "
                                    f"{self.seq_len_tokens - 1}")
                seen[token] = 1
        self.token_permutation = perm
        self._index_cache = {}

    def _groups(self, doc, key, count, size):
        groups = doc.get(key)
        _require(isinstance(groups, list) and len(groups) == count,
                 f"{self.source}: {key} must hold {count} groups of {size} ranks")
        for i, group in enumerate(groups):
            _rank_list(group, f"{self.source}: {key}[{i}]", self.world_size)
            _require(len(group) == size, f"{self.source}: {key}[{i}] has {len(group)} ranks, not {size}")
        self._check_partition(groups, f"{self.source}: {key}")
        return groups

    def _check_partition(self, groups, where):
        seen = [False] * self.world_size
        for group in groups:
            for rank in group:
                _require(not seen[rank], f"{where} lists rank {rank} twice")
                seen[rank] = True
        if not all(seen):
            raise PlanError(f"{where} leaves out rank {seen.index(False)}")

    # --- the world -------------------------------------------------------------------------------
    def check_world(self, world_size):
        """Raises PlanError unless the running world has exactly the plan's ranks."""
        _require(world_size == self.world_size,
                 f"{self.source} (plan {self.name}) needs {self.world_size} ranks (context_parallel "
                 f"{self.context_parallel} x head_parallel {self.head_parallel} x data_parallel "
                 f"{self.data_parallel}) but torch.distributed runs {world_size}; start {self.world_size} processes")

    def role(self, rank):
        """The plan's entry for a global rank: ring, cp_rank, head_index, replica, level_index, neighbours."""
        _require(isinstance(rank, int) and 0 <= rank < self.world_size,
                 f"rank {rank!r} does not exist in the plan's world of {self.world_size} ranks")
        return self._roles[rank]

    def setup(self, rank=None, backend=None):
        """Builds every process group (call on every rank, in the same order) and returns this rank's view.

        Groups of one rank are not created (their attribute stays None).
        """
        import torch.distributed as dist

        _require(dist.is_available() and dist.is_initialized(),
                 "torch.distributed is not initialised: call init_process_group first")
        self.check_world(dist.get_world_size())
        if rank is None:
            rank = dist.get_rank()
        view = RankView(self, rank)

        def build(groups):
            mine = None
            for group in groups:
                if len(group) < 2:
                    continue
                handle = dist.new_group(ranks=group, backend=backend)
                if rank in group:
                    mine = handle
            return mine

        view.ring_group = build(self.rings)
        view.level_groups = [build(rings) for rings in self.level_rings]
        view.head_group = build(self.head_parallel_groups)
        view.data_parallel_group = build(self.data_parallel_groups)
        view.grad_sync_group = build(self.grad_sync_groups)
        return view

    # --- data ------------------------------------------------------------------------------------
    def _index(self, cp_rank, device=None):
        import torch

        _require(isinstance(cp_rank, int) and 0 <= cp_rank < self.context_parallel,
                 f"cp_rank {cp_rank!r} does not exist (context_parallel {self.context_parallel})")
        key = (cp_rank, str(device))
        if key not in self._index_cache:
            self._index_cache[key] = torch.tensor(self.token_permutation[cp_rank], dtype=torch.long, device=device)
        return self._index_cache[key]

    def position_ids(self, cp_rank, device=None):
        """Position ids of the tokens ring position `cp_rank` holds, in its local order (int64 tensor)."""
        return self._index(cp_rank, device).clone()

    def permute_tokens(self, tensor, cp_rank, dim=0):
        """The tokens of ring position `cp_rank`, in local order, from a full-sequence tensor."""
        _require(tensor.shape[dim] == self.seq_len_tokens,
                 f"permute_tokens: dimension {dim} has {tensor.shape[dim]} tokens, not {self.seq_len_tokens}")
        return tensor.index_select(dim, self._index(cp_rank, tensor.device))

    def local_token_ids(self, rank):
        """Global token indices the head-parallel rank `rank` feeds before the all-to-all (its slice of
        its ring position's tokens)."""
        role = self.role(rank)
        start, end = role["token_slice"]
        return self.token_permutation[role["cp_rank"]][start:end]

    def unpermute_tokens(self, chunks, dim=0):
        """Inverse of permute_tokens: `chunks[r]` holds ring position r's tokens; returns the sequence."""
        import torch

        _require(len(chunks) == self.context_parallel,
                 f"unpermute_tokens needs {self.context_parallel} chunks, got {len(chunks)}")
        device = chunks[0].device
        joined = torch.cat(list(chunks), dim=dim)
        order = torch.tensor([t for row in self.token_permutation for t in row], dtype=torch.long, device=device)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=device)
        return joined.index_select(dim, inverse)


def load(path="plan.json"):
    """Reads and checks plan.json; raises PlanError naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as error:
        raise PlanError(f"cannot read {path}: {error}") from error
    except json.JSONDecodeError as error:
        raise PlanError(f"{path} is not valid JSON: {error}") from error
    return Plan(doc, source=str(path))
