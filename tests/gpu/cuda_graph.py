"""A CUDA graph under gshare: capture, replay, and one count per replay.

A training step (forward, loss, backward) of a small model is captured into
torch.cuda.CUDAGraph, after PyTorch's documented warmup on a side stream,
then replayed N times. Checks:
  - the replayed results equal an eager run of the same step;
  - gshare's launch counter grows by exactly N over the replay loop: a graph
    launch is one unit (docs/DESIGN.md, §3.5), and launches recorded during
    capture are not run, so they must not have been counted either.
Why: gshare's launch gate schedules graph launches as units, and stream
capture must not be disturbed (nothing blocks or counts while capturing).
"""

import os

import torch
from torch import nn

from gshare_gpu import launches

REPLAYS = 50


def main():
    torch.manual_seed(0)
    # No dropout or other RNG: a graph that used RNG makes replay() first
    # refill the generator's seed and offset tensors (two fill kernels), and
    # older PyTorch versions do that for every graph. Without RNG, current
    # ones launch the graph alone.
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10)).cuda()
    loss_fn = nn.CrossEntropyLoss()
    static_input = torch.randn(64, 256, device="cuda")
    static_target = torch.randint(0, 10, (64,), device="cuda")

    # Warmup on a side stream, as https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs
    # prescribes, so lazy initialisation happens outside the capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            loss_fn(model(static_input), static_target).backward()
    torch.cuda.current_stream().wait_stream(side)

    pid = os.getpid()
    torch.cuda.synchronize()
    before_eager = launches(pid)
    model.zero_grad(set_to_none=True)
    loss_fn(model(static_input), static_target).backward()
    torch.cuda.synchronize()
    eager_step = launches(pid) - before_eager

    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    before_capture = launches(pid)
    with torch.cuda.graph(graph):
        static_output = model(static_input)
        static_loss = loss_fn(static_output, static_target)
        static_loss.backward()
    torch.cuda.synchronize()
    around_capture = launches(pid) - before_capture
    print(f"one eager step: {eager_step} launches counted; around its capture: "
          f"{around_capture} (only kernels run outside the capture count)")
    assert around_capture < eager_step, (
        f"gshare counted {around_capture} launches around the capture of a step that launches "
        f"{eager_step} kernels eagerly: launches recorded during capture are being counted")

    torch.cuda.synchronize()
    before = launches(pid)
    for _ in range(REPLAYS):
        graph.replay()
    torch.cuda.synchronize()
    after = launches(pid)
    print(f"gshare counted {after - before} launches over {REPLAYS} graph replays "
          f"({before} -> {after})")

    replayed_output = static_output.clone()
    replayed_loss = static_loss.item()
    replayed_grads = [p.grad.clone() for p in model.parameters()]

    model.zero_grad(set_to_none=True)
    eager_output = model(static_input)
    eager_loss = loss_fn(eager_output, static_target)
    eager_loss.backward()
    # Same kernels on the same data; the tolerance only allows cuBLAS to
    # pick another algorithm inside the capture.
    close = {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(replayed_output, eager_output, **close,
                               msg="graph output differs from eager")
    torch.testing.assert_close(replayed_loss, eager_loss.item(), **close,
                               msg="graph loss differs from eager")
    for replayed, param in zip(replayed_grads, model.parameters()):
        torch.testing.assert_close(replayed, param.grad, **close,
                                   msg="graph gradient differs from eager")
    print(f"replayed loss {replayed_loss:.6f} equals eager loss {eager_loss.item():.6f}; "
          "outputs and gradients match")

    assert after - before == REPLAYS, (
        f"gshare counted {after - before} launches for {REPLAYS} graph replays, expected "
        f"exactly {REPLAYS} (one per cuGraphLaunch)"
        + (f"; {(after - before) // REPLAYS} per replay suggests this PyTorch's replay() "
           "launches kernels besides the graph" if (after - before) % REPLAYS == 0 else ""))
    print("PASS")


if __name__ == "__main__":
    main()
