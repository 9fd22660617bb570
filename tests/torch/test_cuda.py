# CUDA tensors through the backend: 2 processes sharing the GPUs there are (rank %
# device_count), each op on device tensors written on a side stream just before the
# call, so the backend's ordering after the caller's current stream is what is tested.
# Exits 77 ("skipped") where torch has no CUDA or sees no GPU (a CPU build of torch,
# or a machine without a GPU): it runs only with a CUDA torch on a GPU machine.
#
# Run: PYTHONPATH=build/python python3 tests/torch/test_cuda.py (a Python with torch 2.x)
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ports import free_ports

SKIP = 77


def check(name, got, want, failures):
    if not torch.equal(got.cpu(), want.cpu()):
        failures.append(f"{name}: got {got.cpu().tolist()[:8]}, expected {want.cpu().tolist()[:8]}")


def body(rank, n, failures):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    side = torch.cuda.Stream(dev)
    with torch.cuda.stream(side):  # written on the caller's current stream, then used at once
        x = torch.full((1 << 20,), float(rank + 1), device=dev)
        dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    check("all_reduce", x, torch.full_like(x, n * (n + 1) / 2), failures)
    b = torch.arange(1000, device=dev, dtype=torch.int32) * (rank + 1)
    dist.broadcast(b, src=1)
    check("broadcast", b, torch.arange(1000, device=dev, dtype=torch.int32) * 2, failures)
    out = torch.empty(n * 7, device=dev, dtype=torch.float16)
    dist.all_gather_into_tensor(out, torch.full((7,), float(rank), device=dev, dtype=torch.float16))
    check("all_gather_into_tensor", out, torch.arange(n, device=dev).repeat_interleave(7).half(), failures)
    a2a_in = torch.arange(n * 3, device=dev, dtype=torch.float32) + 100 * rank
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    want = torch.cat([torch.arange(rank * 3, rank * 3 + 3, device=dev) + 100 * r for r in range(n)]).float()
    check("all_to_all_single", a2a_out, want, failures)
    msg = torch.full((5,), float(rank), device=dev)
    got = torch.empty(5, device=dev)
    works = [dist.isend(msg, (rank + 1) % n), dist.irecv(got, (rank - 1) % n)]
    for w in works:
        w.wait()
    check("isend/irecv", got, torch.full((5,), float((rank - 1) % n), device=dev), failures)
    cpu = torch.full((3,), float(rank + 1))  # the group's CPU communicator beside the CUDA one
    dist.all_reduce(cpu)
    check("all_reduce (CPU)", cpu, torch.full((3,), n * (n + 1) / 2), failures)


def run(rank, n, port, results):
    import torch_collectives  # noqa: F401  (PYTHONPATH is inherited)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # The group before the device, as many training scripts do: its CUDA tensors then
    # need the communicator the backend binds to their device at the first CUDA call.
    dist.init_process_group("collectives", rank=rank, world_size=n)
    torch.cuda.set_device(rank % torch.cuda.device_count())
    failures = []
    try:
        body(rank, n, failures)
    except Exception as e:  # noqa: BLE001
        failures.append(f"raised {type(e).__name__}: {e}")
    dist.destroy_process_group()
    results.put((rank, failures))


def main():
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print(f"skipped: torch {torch.__version__} has no CUDA or sees no GPU")
        return SKIP
    n = 2
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_ports(1)[0]
    procs = [ctx.Process(target=run, args=(r, n, port, results)) for r in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    bad = 0
    for _ in range(n):
        rank, failures = results.get(timeout=5)
        for f in failures:
            print(f"FAIL rank {rank}: {f}")
            bad += 1
    print("cuda tensors: OK" if bad == 0 else f"cuda tensors: {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
