"""A latency-critical PyTorch inference loop for the priority benchmark,
bf16, under torch.inference_mode:
  --model conv (default)  a small VGG/ResNet-like convnet: 10 conv3x3 +
                          BatchNorm + ReLU layers (64 to 512 channels,
                          224x224 input down to 14x14), pooling, a
                          1000-way Linear; batch --batch (default 16);
                          roughly 1-3 ms a request on an H100
  --model mlp             --depth Linear(--width, --width) layers, GELU
                          between, batch --batch
Requests arrive open loop at --rate per second from T0 on (request i is due
at T0 + i/rate); each request is one forward pass and `.item()` of the
output's sum, so its result is on the host. Latency = issue to result on
the host. Memory: well under 1 GiB.

With --turn I/N the job takes turns on the GPU with N - 1 others
(benchlib/turns.py): it issues only the requests due in its own turns of
--turn-s seconds, none within --turn-guard-ms of a turn's end.

usage: infer_job.py [--window S] [--rate R] [--model conv|mlp] [--batch N]
                    [--width N --depth N] [--image PIXELS]
                    [--turn I/N --turn-s S --turn-guard-ms MS]
                    [--ready-file F --start-file F] [--out FILE] [--fake-ms MS]
Output: one JSON object {"kind": "infer", "requests": [[due, issued, done], ...]}
with times in seconds from T0. A request issued after its due time (the
previous one ran long) is "late": latency from due time shows that queueing.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib
from benchlib import jobutil  # noqa: E402
from benchlib.turns import Turns  # noqa: E402


def build_request(args):
    import torch
    from torch import nn

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise jobutil.JobError("PyTorch sees no CUDA device")
    torch.manual_seed(1)
    layers = []
    if args.model == "conv":
        def block(cin, cout, stride):
            return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                    nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
        layers += block(3, 64, 2) + block(64, 128, 2)
        layers += block(128, 128, 1) + block(128, 128, 1) + block(128, 256, 2)
        layers += block(256, 256, 1) + block(256, 256, 1) + block(256, 512, 2)
        layers += block(512, 512, 1) + block(512, 512, 1)
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
        shape = (args.batch, 3, args.image, args.image)
    else:
        for index in range(args.depth):
            layers.append(nn.Linear(args.width, args.width))
            if index + 1 < args.depth:
                layers.append(nn.GELU())
        shape = (args.batch, args.width)
    model = nn.Sequential(*layers).to(device, torch.bfloat16).eval()
    inputs = torch.randn(*shape, device=device, dtype=torch.bfloat16)

    def request():
        with torch.inference_mode():
            return model(inputs).float().sum().item()

    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    return request, {"torch": torch.__version__, "gpu": gpu}


def build_fake(args):
    def request():
        time.sleep(args.fake_ms / 1000.0)
        return 0.0
    return request, {"torch": None, "gpu": "fake"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    jobutil.add_common_arguments(parser)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--warmup-requests", type=int, default=50)
    parser.add_argument("--model", default="conv", choices=["conv", "mlp"])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image", type=int, default=224, help="conv: input height and width")
    parser.add_argument("--width", type=int, default=4096, help="mlp: layer width")
    parser.add_argument("--depth", type=int, default=8, help="mlp: layers")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu only to try the script where there is no GPU")
    parser.add_argument("--fake-ms", type=float, default=0.0,
                        help="dry run: sleep this long per request instead of a forward")
    parser.add_argument("--turn", default="", help="I/N: take turn I of every N (see above)")
    parser.add_argument("--turn-s", type=float, default=0.5, help="length of a turn")
    parser.add_argument("--turn-guard-ms", type=float, default=20.0,
                        help="issue nothing this close to the end of a turn")
    args = parser.parse_args()
    if args.rate <= 0:
        parser.error("--rate must be positive")
    try:
        turns = Turns.parse(args.turn, args.turn_s, args.turn_guard_ms / 1000.0)
    except ValueError as error:
        parser.error(str(error))

    def body():
        watch = jobutil.ParentWatch()
        began = time.monotonic()
        request, info = build_fake(args) if args.fake_ms > 0 else build_request(args)
        built = time.monotonic()
        for _ in range(args.warmup_requests):
            request()
        warmed = time.monotonic()
        t0 = jobutil.barrier(args.ready_file, args.start_file, args.barrier_timeout, watch)
        count = int(round(args.window * args.rate))
        # A backlog (requests slower than 1/rate) must not run on for ever.
        give_up = t0 + 2 * args.window + 5
        requests = []
        truncated = False
        for i in range(count):
            due = t0 + i / args.rate
            if turns and not turns.admits(due - t0):
                continue
            jobutil.sleep_until(due)
            if turns and not turns.admits(time.monotonic() - t0):
                continue  # a slow request ran into the guard
            issued = time.monotonic()
            request()
            done = time.monotonic()
            requests.append((round(due - t0, 6), round(issued - t0, 6), round(done - t0, 6)))
            if done > give_up:
                truncated = True
                break
            watch.check()
        record = {
            "kind": "infer", "name": args.name, "ok": True, "pid": os.getpid(), **info,
            "model": {"model": args.model, "batch": args.batch, "image": args.image,
                      "width": args.width, "depth": args.depth, "dtype": "bf16",
                      "fake_ms": args.fake_ms},
            "rate": args.rate, "window_s": args.window,
            "build_s": round(built - began, 3), "warmup_s": round(warmed - built, 3),
            "planned": count, "truncated": truncated, "requests": requests,
            # Requests' times are from here (time.monotonic(), the clock of
            # gshare's debug lines).
            "t0_monotonic": round(t0, 6),
            "turns": turns.describe() if turns else None,
        }
        jobutil.emit(args, record)

    jobutil.run_main(body)


if __name__ == "__main__":
    main()
