#!/usr/bin/env python3
"""PyTorch's view of Collectives: collective, DDP and FSDP2 times, ours against Gloo, side by side.

    .venv/bin/python perf_tests/torch_bench.py            # full run (torch_collectives installed)
    .venv/bin/python perf_tests/torch_bench.py --quick    # a few minutes
    .venv/bin/python perf_tests/torch_bench.py --backends gloo,gloo --quick       # plumbing only

For each process count of --nprocs (default 2,4) it starts that many processes (env://
on 127.0.0.1, a free port), unless a launcher already set RANK and WORLD_SIZE (and
MASTER_ADDR, MASTER_PORT): then the launched processes are the ranks, and --nprocs is
not used. Every rank makes the default group on the first backend of --backends and a
second group on the other (dist.new_group(backend=...)), so both are measured in the same
processes at the same time; rounds alternate between them so that the machine's drift
falls on both alike.

(a) allreduce: dist.all_reduce of float32 tensors (sum, in place, synchronous), sizes
    from --minbytes to --maxbytes by x2. Time per call is the median of the per-call
    times (the slowest rank's median); busbw = bytes / time * 2(n-1)/n (nccl-tests'
    convention). Large sizes get fewer iterations (--iter-bytes). Each size and backend
    is checked once on known data first; wrong results are reported and the exit status
    is 1.
(c) all_gather_into_tensor and reduce_scatter_tensor (FSDP's collectives), float32, the
    whole buffer from --fsdp-minbytes to --fsdp-maxbytes by x4 (each rank's shard is
    1/n of it); busbw = bytes / time * (n-1)/n. Checked once on known data.
(d) coalescing: --coalesce allreduces of --coalesce-bytes each, issued one after another
    (each waited for) and as one block (dist._coalescing_manager, one wait): time per
    block, and how much faster the block is.
(e) FSDP2: one training iteration of the same MLP with every Linear and the whole model
    under fully_shard (parameters all-gathered before use, gradients reduce-scattered),
    one copy per backend; afterwards both copies' parameters must agree (relative
    difference < 1e-3).
(b) DDP: one training iteration (zero_grad, forward, MSE loss, backward, SGD step) of an
    MLP of --layers Linear(--width, --width) + ReLU (6 x 2048: 25.2 M parameters, 101 MB
    of gradients, DDP's default 25 MB buckets), one DDP copy per backend. "compute" is the
    same iteration under no_sync() (no communication at all), measured in the same
    rounds; comm share = (t_ddp - t_compute) / t_ddp is the part of the iteration that
    synchronization adds (the allreduce waits not hidden behind backward, plus DDP's
    copies into and out of its buckets). Afterwards the replicas are checked: identical
    on every rank, and the two backends' updates equal up to rounding (relative
    difference < 1e-3). The batch (--batch 8 per rank) sets the compute to hide behind.

"ours" in the tables is the collectives backend; speedup = baseline time / ours time.
A launch that fails or runs past --timeout is reported and the exit status is 1.

Standard output holds only the tables (plain text, for docs); progress goes to stderr.
"""
import argparse
import copy
import datetime
import json
import math
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10
QUICK_SIZES = [8, 1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB]


def parse_size(text):
    text = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": KiB, "M": MiB, "G": GiB}.get(text[-1:], 1)
    return int(float(text.rstrip("KMG")) * mult)


def human(n):
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def label(backends, i):
    """Column name of backend i: "ours" for collectives; a repeated name gets #2."""
    name = "ours" if backends[i] == "collectives" else backends[i]
    return name + "#2" if i == 1 and backends[0] == backends[1] else name


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def table(headers, rows):
    """Right-aligned plain-text table; the header line starts with '#'."""
    cells = [headers] + rows
    width = [max(len(r[c]) for r in cells) for c in range(len(headers))]
    lines = ["# " + "  ".join(h.rjust(w) for h, w in zip(headers, width))]
    lines += ["  " + "  ".join(v.rjust(w) for v, w in zip(r, width)) for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Measurements (in every rank)


def series(fn, iters):
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def rounds_of(iters, rounds):
    """Split iters into at most `rounds` nearly equal positive chunks."""
    rounds = max(1, min(rounds, iters))
    return [iters // rounds + (1 if r < iters % rounds else 0) for r in range(rounds)]


def slowest(values, ctl):
    """Per-entry maximum over the ranks."""
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctl)
    return t.tolist()


def bench_allreduce(args, rank, n, groups, ctl, save):
    sizes = args.sizes
    result = []
    for size in sizes:
        count = max(1, size // 4)
        nbytes = count * 4
        iters = min(args.iters, max(args.min_iters, args.iter_bytes // nbytes))
        warmup = max(1, min(args.warmup, args.iter_bytes // nbytes // 4))
        buf = torch.empty(count, dtype=torch.float32)
        wrong = []
        for g in groups:  # check on known data, then warm up
            buf.fill_(rank + 1)
            dist.all_reduce(buf, group=g)
            wrong.append(int((buf != n * (n + 1) / 2).sum()))
            buf.zero_()  # zeros stay zeros: no overflow over many calls
            for _ in range(warmup):
                dist.all_reduce(buf, group=g)
        times = [[] for _ in groups]
        for r, chunk in enumerate(rounds_of(iters, args.rounds)):
            order = list(range(len(groups)))
            for i in (order if r % 2 == 0 else order[::-1]):
                g = groups[i]
                times[i] += series(lambda: dist.all_reduce(buf, group=g), chunk)
        med = slowest([statistics.median(t) for t in times], ctl)
        wrong = [int(w) for w in slowest(wrong, ctl)]
        row = {"bytes": nbytes, "iters": iters, "time_s": med, "wrong": wrong}
        result.append(row)
        save(result)  # after each size: a launch that fails later keeps its rows
        if rank == 0:
            log(f"[{n} procs] allreduce {human(nbytes):>8}: "
                + ", ".join(f"{label(args.backends, i)} {med[i] * 1e6:.1f} us"
                            for i in range(len(groups))))
    return result


def alternate(fns, iters, rounds, ctl=None):
    """Per function, the times of its calls, in rounds that alternate their order."""
    times = [[] for _ in fns]
    for r, chunk in enumerate(rounds_of(iters, rounds)):
        order = list(range(len(fns)))
        for i in (order if r % 2 == 0 else order[::-1]):
            if ctl is not None:
                dist.barrier(group=ctl)
            times[i] += series(fns[i], chunk)
    return times


def bench_shards(args, rank, n, groups, ctl, kind):
    """(c): all_gather_into_tensor or reduce_scatter_tensor over each size."""
    rows = []
    gather = kind == "all_gather_into_tensor"
    for size in args.fsdp_sizes:
        shard = max(1, size // 4 // n)
        whole = torch.empty(shard * n)
        part = torch.empty(shard)
        iters = min(args.iters, max(args.min_iters, args.iter_bytes // (shard * n * 4)))

        def call(g):
            if gather:
                dist.all_gather_into_tensor(whole, part, group=g)
            else:
                dist.reduce_scatter_tensor(part, whole, group=g)

        wrong = []
        for g in groups:  # known data first: rank r's shard holds r + 1
            if gather:
                part.fill_(rank + 1)
                call(g)
                want = torch.arange(1, n + 1, dtype=torch.float32).repeat_interleave(shard)
                wrong.append(int((whole != want).sum()))
            else:
                whole.fill_(rank + 1)
                call(g)
                wrong.append(int((part != n * (n + 1) / 2).sum()))
            for _ in range(max(1, args.warmup // 2)):
                call(g)
        times = alternate([lambda g=g: call(g) for g in groups], iters, args.rounds)
        med = slowest([statistics.median(t) for t in times], ctl)
        rows.append({"bytes": shard * n * 4, "iters": iters, "time_s": med,
                     "wrong": [int(w) for w in slowest(wrong, ctl)]})
        if rank == 0:
            log(f"[{n} procs] {kind} {human(shard * n * 4):>8}: "
                + ", ".join(f"{label(args.backends, i)} {med[i] * 1e6:.1f} us" for i in range(len(groups))))
    return rows


def bench_coalesce(args, rank, n, groups, ctl):
    """(d): a block of small allreduces, one by one against one coalesced block."""
    count = max(1, args.coalesce_bytes // 4)
    tensors = [torch.full((count,), float(rank + 1)) for _ in range(args.coalesce)]

    def separate(g):
        for t in tensors:
            dist.all_reduce(t, group=g)

    def block(g):
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for t in tensors:
                dist.all_reduce(t, group=g)
        cm.wait()

    wrong = []
    for g in groups:
        for fn in (separate, block):
            for t in tensors:
                t.fill_(rank + 1)
            fn(g)
            wrong.append(sum(int((t != n * (n + 1) / 2).sum()) for t in tensors))
        for t in tensors:
            t.zero_()
        for _ in range(args.warmup):
            separate(g)
            block(g)
    fns = [lambda g=g, f=f: f(g) for g in groups for f in (separate, block)]
    times = alternate(fns, max(args.min_iters, args.iters // 2), args.rounds)
    med = slowest([statistics.median(t) for t in times], ctl)
    row = {"count": args.coalesce, "bytes": count * 4, "time_s": med, "wrong": [int(w) for w in slowest(wrong, ctl)]}
    if rank == 0:
        log(f"[{n} procs] {args.coalesce} x {human(count * 4)} allreduce: "
            + ", ".join(f"{label(args.backends, i)} separate {med[2 * i] * 1e6:.0f} us, block "
                        f"{med[2 * i + 1] * 1e6:.0f} us" for i in range(len(groups))))
    return row


def mlp(args):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def bench_fsdp(args, rank, n, groups, ctl):
    """(e): FSDP2 training iterations, one model per backend."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    base = mlp(args)
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randn(args.batch, args.width, generator=gen)
    models, opts = [], []
    for g in groups:
        m = copy.deepcopy(base)
        mesh = DeviceMesh.from_group(g, "cpu")
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        models.append(m)
        opts.append(torch.optim.SGD(m.parameters(), lr=1e-4))

    def step(i):
        opts[i].zero_grad(set_to_none=False)
        torch.nn.functional.mse_loss(models[i](x), y).backward()
        opts[i].step()

    fns = [lambda i=i: step(i) for i in range(len(groups))]
    for fn in fns:
        for _ in range(args.ddp_warmup):
            fn()
    times = alternate(fns, args.ddp_iters, args.ddp_rounds, ctl)
    med = slowest([statistics.median(t) for t in times], ctl)
    differ = 0.0
    if len(groups) > 1:  # same steps on the same data: the two updates must agree
        num = den = 0.0
        for p0, p1, b in zip(models[0].parameters(), models[1].parameters(), base.parameters()):
            d0 = p0.full_tensor().detach().double() - b.detach().double()
            num += float((p1.full_tensor().detach().double() - b.detach().double() - d0).pow(2).sum())
            den += float(d0.pow(2).sum())
        differ = slowest([math.sqrt(num / den) if den > 0 else math.inf], ctl)[0]
    row = {"nprocs": n, "params": sum(p.numel() for p in base.parameters()), "batch": args.batch,
           "iters": args.ddp_iters, "time_s": med, "differ": differ}
    if rank == 0:
        log(f"[{n} procs] FSDP2: " + ", ".join(f"{label(args.backends, i)} {med[i] * 1e3:.1f} ms"
                                            for i in range(len(groups))))
    return row


def bench_ddp(args, rank, n, groups, ctl):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    base = torch.nn.Sequential(*layers)
    params = sum(p.numel() for p in base.parameters())
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own batch
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randn(args.batch, args.width, generator=gen)

    # One replica per backend, plus one for the compute-only loop (never synchronized,
    # so its steps do not make the measured replicas diverge).
    models = [DDP(copy.deepcopy(base), process_group=g, bucket_cap_mb=args.bucket_mb)
              for g in groups]
    models.append(DDP(copy.deepcopy(base), process_group=ctl, bucket_cap_mb=args.bucket_mb))
    opts = [torch.optim.SGD(m.parameters(), lr=1e-4) for m in models]

    def step(i):
        models[i].zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(models[i](x), y)
        loss.backward()
        opts[i].step()

    def step_nosync(i):
        with models[i].no_sync():
            step(i)

    fns = [lambda i=i: step(i) for i in range(len(groups))]
    fns.append(lambda: step_nosync(len(groups)))
    for fn in fns:
        for _ in range(args.ddp_warmup):
            fn()
    times = [[] for _ in fns]
    for r, chunk in enumerate(rounds_of(args.ddp_iters, args.ddp_rounds)):
        order = list(range(len(fns)))
        for i in (order if r % 2 == 0 else order[::-1]):
            dist.barrier(group=ctl)
            times[i] += series(fns[i], chunk)
    med = slowest([statistics.median(t) for t in times], ctl)

    # The synchronized replicas must be identical on every rank.
    sums = [float(sum(p.detach().double().sum() for p in m.parameters())) for m in models[:-1]]
    hi = slowest(sums, ctl)
    lo = [-v for v in slowest([-s for s in sums], ctl)]
    # Both backends made the same number of steps on the same data: their updates must
    # agree up to the order of the additions. |delta_1 - delta_0| / |delta_0|, worst rank:
    differ = 0.0
    if len(groups) > 1:
        num = den = 0.0
        for p0, p1, b in zip(models[0].parameters(), models[1].parameters(), base.parameters()):
            d0 = (p0.detach() - b.detach()).double()
            num += float((p1.detach().double() - b.detach().double() - d0).pow(2).sum())
            den += float(d0.pow(2).sum())
        differ = slowest([math.sqrt(num / den) if den > 0 else math.inf], ctl)[0]
    row = {"nprocs": n, "params": params, "grad_bytes": params * 4,
           "batch": args.batch, "iters": args.ddp_iters, "time_s": med[:-1],
           "compute_s": med[-1], "consistent": [h == l for h, l in zip(hi, lo)],
           "differ": differ}
    if rank == 0:
        log(f"[{n} procs] DDP: compute {med[-1] * 1e3:.1f} ms, "
            + ", ".join(f"{label(args.backends, i)} {med[i] * 1e3:.1f} ms"
                        for i in range(len(groups))))
    return row


def worker(rank, n, args, outdir):
    """One rank: rank 0 writes its results as JSON under outdir."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank))
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // n))
    if "collectives" in args.backends:
        import torch_collectives  # noqa: F401  registers the "collectives" backend
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(args.backends[0], init_method="env://", rank=rank,
                            world_size=n, timeout=timeout)
    groups = [dist.group.WORLD]
    if len(args.backends) > 1:
        groups.append(dist.new_group(backend=args.backends[1], timeout=timeout))
    ctl = dist.new_group(backend="gloo", timeout=timeout)  # results, barriers

    def save(kind, data):
        if rank == 0:  # atomically: the launch may be killed at any time
            path = os.path.join(outdir, f"{n}.{kind}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(data, f)
            os.replace(path + ".tmp", path)

    if not args.no_allreduce:
        bench_allreduce(args, rank, n, groups, ctl, lambda rows: save("allreduce", rows))
    if not args.no_fsdp_ops:
        for kind in ("all_gather_into_tensor", "reduce_scatter_tensor"):
            save(kind, bench_shards(args, rank, n, groups, ctl, kind))
    if not args.no_coalesce:
        save("coalesce", bench_coalesce(args, rank, n, groups, ctl))
    if not args.no_ddp:
        save("ddp", bench_ddp(args, rank, n, groups, ctl))
    if not args.no_fsdp:
        save("fsdp", bench_fsdp(args, rank, n, groups, ctl))
    dist.barrier(group=ctl)
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------
# Launching and reporting (in the first process)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n, args, outdir):
    """Runs n ranks; returns an error message, or None."""
    import torch.multiprocessing as mp
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    ctx = mp.start_processes(worker, args=(n, args, outdir), nprocs=n, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + args.timeout
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                return f"timed out after {args.timeout} s (--timeout)"
    except Exception as e:  # a rank failed: its traceback is in the exception
        return f"{type(e).__name__}: {e}"
    return None


def environment(args):
    """Library version, CPU model and core count, for the tables' header."""
    parts = []
    if "collectives" in args.backends:
        try:
            import torch_collectives
            parts.append(f"collectives {torch_collectives.library_version()}")
        except Exception as e:  # the ranks report the real failure
            parts.append(f"collectives ({type(e).__name__})")
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    parts.append(f"{os.cpu_count()} cores ({cpu})")
    return ", ".join(parts)


def report(args, outdir, counts, threads):
    b = args.backends
    two = len(b) > 1
    names = [label(b, i) for i in range(len(b))]
    # "ours" is collectives wherever it is in --backends (else the first); baseline first
    ours = b.index("collectives") if two and "collectives" in b else 0
    base = 1 - ours if two else 0
    wrong = False
    legend = f"# ours = collectives; speedup = {names[base]} time / {names[ours]} time" \
        if two and "collectives" in b else \
        f"# speedup = {names[base]} time / {names[ours]} time" if two else ""
    out = [f"# torch_bench.py: torch {torch.__version__}, {environment(args)}", ""]
    for n in counts:
        path = os.path.join(outdir, f"{n}.allreduce.json")
        if not os.path.exists(path):
            continue
        rows = json.load(open(path))
        out.append(f"# allreduce: dist.all_reduce, float32, sum, in place, synchronous; "
                   f"{n} processes, {threads(n)} thread(s) each")
        out.append("# time: median per call (slowest rank), us; "
                   "busbw = bytes/time * 2(n-1)/n, GB/s")
        if legend:
            out.append(legend)
        cols = [base, ours] if two else [0]
        headers = ["size"] + [f"{names[i]} us" for i in cols] \
            + [f"{names[i]} busbw" for i in cols] + (["speedup"] if two else []) + ["iters"]
        lines = []
        for r in rows:
            t = r["time_s"]
            bw = [r["bytes"] / t[i] * 2 * (n - 1) / n / 1e9 for i in cols]
            line = [human(r["bytes"])] + [f"{t[i] * 1e6:.1f}" for i in cols] \
                + [f"{v:.3f}" if v < 10 else f"{v:.2f}" for v in bw]
            if two:
                line.append(f"{t[base] / t[ours]:.2f}x")
            line.append(str(r["iters"]))
            for i, w in enumerate(r["wrong"]):
                if w:
                    wrong = True
                    line.append(f"WRONG: {names[i]} {w} elements")
            lines.append(line)
        width = len(headers)
        out.append(table(headers, [ln[:width] for ln in lines]))
        out += [f"# {human(r['bytes'])}: " + " ".join(ln[width:])
                for r, ln in zip(rows, lines) if len(ln) > width]
        out.append("")

    cols = [base, ours] if two else [0]
    for kind in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        for n in counts:
            path = os.path.join(outdir, f"{n}.{kind}.json")
            if not os.path.exists(path):
                continue
            out.append(f"# {kind}: float32, size = the whole buffer (each rank's shard 1/{n}); {n} processes")
            out.append("# time: median per call (slowest rank), us; busbw = bytes/time * (n-1)/n, GB/s")
            headers = ["size"] + [f"{names[i]} us" for i in cols] + [f"{names[i]} busbw" for i in cols] \
                + (["speedup"] if two else [])
            lines = []
            for r in json.load(open(path)):
                t = r["time_s"]
                line = [human(r["bytes"])] + [f"{t[i] * 1e6:.1f}" for i in cols] \
                    + [f"{r['bytes'] / t[i] * (n - 1) / n / 1e9:.2f}" for i in cols]
                if two:
                    line.append(f"{t[base] / t[ours]:.2f}x")
                lines.append(line)
                for i, w in enumerate(r["wrong"]):
                    if w:
                        wrong = True
                        out.append(f"# WRONG: {kind} {human(r['bytes'])}: {names[i]} {w} elements")
            out.append(table(headers, lines))
            out.append("")
    rows = [(n, json.load(open(os.path.join(outdir, f"{n}.coalesce.json"))))
            for n in counts if os.path.exists(os.path.join(outdir, f"{n}.coalesce.json"))]
    if rows:
        r0 = rows[0][1]
        out.append(f"# coalescing: {r0['count']} allreduces of {human(r0['bytes'])}, one by one (each "
                   "waited for) or as one dist._coalescing_manager block; us per block (slowest rank)")
        headers = ["procs"] + sum(([f"{names[i]} separate", f"{names[i]} block", f"{names[i]} gain"]
                                   for i in cols), [])
        lines = []
        for n, r in rows:
            t = r["time_s"]
            line = [str(n)]
            for i in cols:
                line += [f"{t[2 * i] * 1e6:.0f}", f"{t[2 * i + 1] * 1e6:.0f}", f"{t[2 * i] / t[2 * i + 1]:.2f}x"]
            lines.append(line)
            for i, w in enumerate(r["wrong"]):
                if w:
                    wrong = True
                    out.append(f"# WRONG: coalescing, {n} procs: {w} elements ({names[i // 2]})")
        out.append(table(headers, lines))
        out.append("")

    ddp = [json.load(open(os.path.join(outdir, f"{n}.ddp.json")))
           for n in counts if os.path.exists(os.path.join(outdir, f"{n}.ddp.json"))]
    if ddp:
        d = ddp[0]
        out.append(f"# DDP iteration: MLP of {args.layers} x Linear({args.width}, {args.width})"
                   f" + ReLU, {d['params'] / 1e6:.1f} M parameters "
                   f"({d['grad_bytes'] / 1e6:.0f} MB of gradients), bucket {args.bucket_mb} MB,"
                   f" batch {d['batch']} per rank, SGD")
        out.append(f"# median of {d['iters']} iterations (slowest rank), ms; compute = the "
                   "same iteration under no_sync(); comm = (t - compute) / t")
        if legend:
            out.append(legend)
        cols = [base, ours] if two else [0]
        headers = ["procs", "compute ms"] + [f"{names[i]} ms" for i in cols] \
            + [f"{names[i]} comm" for i in cols]
        if two:
            headers += ["saved ms", "saved", "speedup"]
        lines = []
        for d in ddp:
            t, c = d["time_s"], d["compute_s"]
            line = [str(d["nprocs"]), f"{c * 1e3:.1f}"] + [f"{t[i] * 1e3:.1f}" for i in cols] \
                + [f"{(t[i] - c) / t[i] * 100:.0f}%" for i in cols]  # < 0: noise
            if two:
                line += [f"{(t[base] - t[ours]) * 1e3:.1f}",
                         f"{(t[base] - t[ours]) / t[base] * 100:.0f}%",
                         f"{t[base] / t[ours]:.2f}x"]
            lines.append(line)
        out.append(table(headers, lines))
        if two:
            out.append("# checks: replicas identical on all ranks: "
                       + ", ".join(f"{d['nprocs']} procs "
                                   + ("yes" if all(d["consistent"]) else "NO") for d in ddp)
                       + f"; {names[ours]} vs {names[base]} updates, relative difference: "
                       + ", ".join(f"{d['differ']:.1g}" for d in ddp))
        for d in ddp:
            for i, ok in enumerate(d["consistent"]):
                if not ok:
                    wrong = True
                    out.append(f"# WRONG: {d['nprocs']} procs, {names[i]}: the DDP replicas "
                               "differ across ranks")
            if d["differ"] > 1e-3:
                wrong = True
                out.append(f"# WRONG: {d['nprocs']} procs: the replicas trained over "
                           f"{names[base]} and {names[ours]} differ (relative {d['differ']:.2g})")
    fsdp = [json.load(open(os.path.join(outdir, f"{n}.fsdp.json")))
            for n in counts if os.path.exists(os.path.join(outdir, f"{n}.fsdp.json"))]
    if fsdp:
        out.append("")
        out.append(f"# FSDP2 iteration: the same MLP, every Linear and the model under fully_shard, "
                   f"batch {fsdp[0]['batch']} per rank, SGD; median of {fsdp[0]['iters']} (slowest rank), ms")
        headers = ["procs"] + [f"{names[i]} ms" for i in cols] + (["saved ms", "speedup"] if two else [])
        lines = []
        for d in fsdp:
            t = d["time_s"]
            line = [str(d["nprocs"])] + [f"{t[i] * 1e3:.1f}" for i in cols]
            if two:
                line += [f"{(t[base] - t[ours]) * 1e3:.1f}", f"{t[base] / t[ours]:.2f}x"]
            lines.append(line)
            if d["differ"] > 1e-3:
                wrong = True
                out.append(f"# WRONG: {d['nprocs']} procs: FSDP2 over {names[base]} and {names[ours]} "
                           f"differ (relative {d['differ']:.2g})")
        out.append(table(headers, lines))
        if two:
            out.append("# checks: the two copies' updates, relative difference: "
                       + ", ".join(f"{d['nprocs']} procs {d['differ']:.1g}" for d in fsdp))
    print("\n".join(out), flush=True)
    return not wrong


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--nprocs", default="2,4", help="process counts (default 2,4)")
    p.add_argument("--backends", default="collectives,gloo",
                   help="one or two backends; the first makes the default group, the "
                        "second a dist.new_group (default collectives,gloo)")
    p.add_argument("--minbytes", default="8", help="smallest allreduce (default 8)")
    p.add_argument("--maxbytes", default="128M", help="largest allreduce (default 128M)")
    p.add_argument("--iters", type=int, default=100, help="allreduce calls per size (100)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up calls per size (5)")
    p.add_argument("--iter-bytes", default="1G",
                   help="bytes per size and backend beyond which sizes get fewer "
                        "calls (default 1G: 32 MiB 32 calls, 128 MiB 8)")
    p.add_argument("--min-iters", type=int, default=7, help="fewest calls per size (7)")
    p.add_argument("--rounds", type=int, default=4,
                   help="alternations between the backends per size (4)")
    p.add_argument("--ddp-iters", type=int, default=12, help="DDP iterations (12)")
    p.add_argument("--ddp-warmup", type=int, default=3, help="DDP warm-up iterations (3)")
    p.add_argument("--ddp-rounds", type=int, default=3, help="DDP alternations (3)")
    p.add_argument("--width", type=int, default=2048, help="MLP width (2048)")
    p.add_argument("--layers", type=int, default=6, help="MLP Linear layers (6: 25.2 M)")
    p.add_argument("--batch", type=int, default=8, help="DDP batch per rank (8)")
    p.add_argument("--bucket-mb", type=int, default=25, help="DDP bucket_cap_mb (25)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per rank (default: cores / processes, at least 1)")
    p.add_argument("--fsdp-minbytes", default="1M", help="smallest (c) buffer (default 1M)")
    p.add_argument("--fsdp-maxbytes", default="64M", help="largest (c) buffer (default 64M)")
    p.add_argument("--coalesce", type=int, default=32, help="allreduces per block in (d) (32)")
    p.add_argument("--coalesce-bytes", default="1K", help="bytes of each allreduce in (d) (1K)")
    p.add_argument("--no-allreduce", action="store_true", help="skip (a)")
    p.add_argument("--no-ddp", action="store_true", help="skip (b)")
    p.add_argument("--no-fsdp-ops", action="store_true", help="skip (c)")
    p.add_argument("--no-coalesce", action="store_true", help="skip (d)")
    p.add_argument("--no-fsdp", action="store_true", help="skip (e)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 5 sizes to 16 MiB, few iterations (< 1 min)")
    p.add_argument("--timeout", type=int, default=1800,
                   help="seconds one launch may take (default 1800)")
    args = p.parse_args()

    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not 1 <= len(args.backends) <= 2:
        p.error("--backends takes one or two names")
    args.iter_bytes = parse_size(args.iter_bytes)
    if args.quick:
        args.sizes = [s for s in QUICK_SIZES
                      if parse_size(args.minbytes) <= s <= parse_size(args.maxbytes)]
        args.iters, args.warmup, args.min_iters, args.rounds = 6, 2, 4, 2
        args.ddp_iters, args.ddp_warmup, args.ddp_rounds = 4, 1, 2
        args.fsdp_maxbytes = "4M"
    else:
        lo, hi = max(4, parse_size(args.minbytes)), parse_size(args.maxbytes)
        args.sizes = [lo << k for k in range(64) if lo << k <= hi]
    lo, hi = parse_size(args.fsdp_minbytes), parse_size(args.fsdp_maxbytes)
    args.fsdp_sizes = [lo << (2 * k) for k in range(32) if lo << (2 * k) <= hi]
    args.coalesce_bytes = parse_size(args.coalesce_bytes)

    def threads(n):
        return args.threads or max(1, (os.cpu_count() or 1) // n)

    t0 = time.monotonic()
    outdir = tempfile.mkdtemp(prefix="torch_bench.")
    errors = []
    try:
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under a launcher
            rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            worker(rank, n, args, outdir)
            counts = [n] if rank == 0 else []
        else:
            counts = [int(c) for c in args.nprocs.split(",") if c.strip()]
            for n in counts:
                log(f"[{n} procs] starting, backends {','.join(args.backends)}")
                err = launch(n, args, outdir)
                if err:
                    errors.append(f"{n} processes: {err}")
                    log(f"[{n} procs] FAILED: {err}")
        ok = report(args, outdir, counts, threads) if counts else True
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    for e in errors:  # the full message went to stderr
        last = [ln for ln in e.splitlines() if ln.strip()]
        print(f"# FAILED: {last[0]} ... {last[-1]}" if len(last) > 1 else f"# FAILED: {e}")
    if counts or errors:
        log(f"total {time.monotonic() - t0:.0f} s")
    sys.exit(0 if ok and not errors else 1)


if __name__ == "__main__":
    main()
