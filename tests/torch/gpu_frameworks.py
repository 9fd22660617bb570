"""Frameworks on a GPU, through this project: three checks, each in its own processes.

    python3 tests/torch/gpu_frameworks.py ddp_ours    # needs torch_collectives importable
    python3 tests/torch/gpu_frameworks.py ddp_nccl    # run with LD_PRELOAD=<build>/libnccl.so.2
    python3 tests/torch/gpu_frameworks.py cupy        # run with LD_PRELOAD=<build>/libnccl.so.2
    python3 tests/torch/gpu_frameworks.py one_rank    # needs torch_collectives importable

ddp_ours: DDP on CUDA tensors over the backend "collectives", 2 processes on one GPU,
against one process training on the whole batch: the losses and parameters must agree.
ddp_nccl: the same training through PyTorch's own ProcessGroupNCCL, which then runs on
the preloaded drop-in libnccl.so.2 (NVIDIA's NCCL refuses two ranks on one GPU; ours
does not); the NCCL version torch reports and the library banner (NCCL_DEBUG=VERSION)
show which NCCL ran. cupy: CuPy's cupy.cuda.nccl allreduce of 2 processes on the drop-in
(torch is not imported). one_rank: one process through init, a CPU and a CUDA all_reduce
and destroy, announcing each step, to tell where a crash happens.
Each prints one line "RESULT <check> PASS|FAIL <details>"; exit 0 only on PASS, 77 where
there is no GPU.
"""
import os
import sys

from ports import free_ports

STEPS, BATCH, WIDTH = 20, 32, 64


def model_and_data(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 1))
    x = torch.randn(STEPS, BATCH, WIDTH)
    y = x.sum(-1, keepdim=True).sin()
    return model, x, y


def train(torch, model, xs, ys, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def ddp_rank(rank, n, port, backend, queue):
    import torch
    import torch.distributed as dist

    if backend == "collectives":
        import torch_collectives  # noqa: F401  (registers the backend)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group(backend, rank=rank, world_size=n)
    model, x, y = model_and_data(torch)
    ddp = torch.nn.parallel.DistributedDataParallel(model.to(dev), device_ids=[0])
    part = BATCH // n
    losses = train(torch, ddp, x[:, rank * part:(rank + 1) * part], y[:, rank * part:(rank + 1) * part], dev)
    # The global loss of each step: the mean of the ranks' losses (equal halves).
    total = torch.stack(losses)
    dist.all_reduce(total)
    total /= n
    params = torch.cat([p.detach().flatten() for p in ddp.parameters()]).cpu()
    info = torch.cuda.nccl.version() if backend == "nccl" else None
    dist.destroy_process_group()
    # Plain lists: a tensor in the queue is passed by a file descriptor that this process,
    # exiting now, may close before the parent has taken it.
    queue.put((rank, total.cpu().tolist(), params.tolist(), info))


def run_ddp(backend):
    import torch
    import torch.multiprocessing as mp

    model, x, y = model_and_data(torch)
    dev = torch.device("cuda", 0)
    ref_losses = torch.stack(train(torch, model.to(dev), x, y, dev)).cpu()
    ref_params = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_ports(1)[0]
    procs = [ctx.Process(target=ddp_rank, args=(r, 2, port, backend, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    codes = [p.exitcode for p in procs]
    _, losses, params, info = sorted(results, key=lambda r: r[0])[0]
    losses, params = torch.tensor(losses), torch.tensor(params)
    loss_err = (losses - ref_losses).abs().max().item()
    param_err = (params - ref_params).abs().max().item()
    ok = codes == [0, 0] and loss_err < 1e-4 and param_err < 1e-4 and losses[-1] < losses[0]
    extra = f" nccl_version={info}" if info is not None else ""
    print(f"RESULT ddp_{'ours' if backend == 'collectives' else 'nccl'} {'PASS' if ok else 'FAIL'} "
          f"exit={codes} loss {losses[0]:.4f}->{losses[-1]:.4f} max|dloss|={loss_err:.2e} "
          f"max|dparam|={param_err:.2e} vs one process{extra}")
    return ok


def cupy_rank(rank, n, uid, queue):
    import cupy
    from cupy.cuda import nccl

    cupy.cuda.Device(0).use()
    comm = nccl.NcclCommunicator(n, uid, rank)
    x = cupy.arange(1 << 20, dtype=cupy.float32) * (rank + 1)
    comm.allReduce(x.data.ptr, x.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                   cupy.cuda.Stream.null.ptr)
    cupy.cuda.Stream.null.synchronize()
    want = cupy.arange(1 << 20, dtype=cupy.float32) * (n * (n + 1) // 2)
    queue.put((rank, bool(cupy.array_equal(x, want)), nccl.get_version()))


def run_cupy():
    import multiprocessing as mp

    from cupy.cuda import nccl

    uid = nccl.get_unique_id()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=cupy_rank, args=(r, 2, uid, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    ok = all(r[1] for r in results) and [p.exitcode for p in procs] == [0, 0]
    print(f"RESULT cupy {'PASS' if ok else 'FAIL'} values_equal={[r[1] for r in sorted(results)]} "
          f"nccl.get_version()={results[0][2]}")
    return ok


def one_rank():
    """One rank, one CUDA all_reduce, each step announced before it runs (with
    COLL_DEBUG=INFO, the library's lines between them): where a process dies, the last
    line says in which step."""
    import torch
    import torch.distributed as dist

    def step(what):
        print(f"STEP {what}", flush=True)

    step("import torch_collectives")
    import torch_collectives  # noqa: F401

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_ports(1)[0]))
    torch.cuda.set_device(0)
    step("init_process_group (the CPU backend)")
    dist.init_process_group("collectives", rank=0, world_size=1)
    step("all_reduce of a CPU tensor")
    t = torch.ones(4)
    dist.all_reduce(t)
    step("all_reduce of a CUDA tensor (makes the CUDA backend)")
    x = torch.ones(1 << 10, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    ok = bool(torch.all(x == 1).item()) and bool(torch.all(t == 1).item())
    step("destroy_process_group")
    dist.destroy_process_group()
    print(f"RESULT one_rank {'PASS' if ok else 'FAIL'}")
    return ok


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "ddp_ours"
    if which == "cupy":  # without torch: CuPy alone on the drop-in
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            print("RESULT cupy SKIP no GPU")
            return 77
        return 0 if run_cupy() else 1
    import torch

    if not torch.cuda.is_available():
        print(f"RESULT {which} SKIP no GPU")
        return 77
    if which == "one_rank":
        return 0 if one_rank() else 1
    return 0 if run_ddp("collectives" if which == "ddp_ours" else "nccl") else 1


if __name__ == "__main__":
    sys.exit(main())
