"""PyTorch's side of bench/peers: Smelt's seed models (train/Trainer.cpp) trained as a PyTorch
user writes them, eager or under torch.compile, and the 6-op elementwise chain of
bench/fusion_chain.cpp. Prints one JSON line (common_args.report).
  torch_peer.py mlp|cnn|chain eager|compile [--batch 256]"""
import time

import torch
import torch.nn.functional as F
from torch import nn

import common_args
from fashion import batches, load_train, median


def seed_model(name):
    """The MLP (784-512-256-10, relu, dropout 0.2) or the CNN (conv 32 and 64, 3x3 same, relu,
    2x2 max pooling, dropout 0.2, dense 10), Glorot-uniform kernels and zero biases as Smelt's
    builder initializes them. The CNN is NCHW, PyTorch's layout."""
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
                              nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.2),
                              nn.Linear(256, 10))
    else:
        model = nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                              nn.Conv2d(1, 32, 3, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 7 * 7, 10))
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def train(args):
    """Median step time of an epoch's consecutive steps, and (compile) the first step's time
    beyond a median step: what torch.compile costs before the first result."""
    model = seed_model(args.workload)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)  # Keras' epsilon, as Smelt

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(1) == y).float().mean()

    if args.mode == "compile":
        step = torch.compile(step)
    images, labels = load_train()
    times, first = [], None
    last = time.perf_counter()
    for i, (x, y) in enumerate(batches(images, labels, args.batch,
                                       common_args.WARMUP + common_args.STEPS + 1)):
        loss, acc = step(torch.from_numpy(x), torch.from_numpy(y).long())
        loss.item()  # the step's results are read, as Smelt's trainer reads its metrics
        now = time.perf_counter()
        if i == 0:
            first = now - last
        elif i > common_args.WARMUP:
            times.append(now - last)
        last = now
    step_ms = median(times) * 1e3
    compile_ms = (first * 1e3 - step_ms) if args.mode == "compile" else None
    common_args.report(args, "torch", step_ms, compile_ms)


def chain(args):
    """y = min((max(x * 1.5 + 0.25, 0) * 2) - 1, 4) over 16M floats into a reused output:
    eager in place on the output (six passes), compiled as one function writing into it."""
    x = torch.empty(1 << 24).uniform_(-2, 2)
    y = torch.zeros_like(x)

    def eager(x, y):
        torch.mul(x, 1.5, out=y)
        y.add_(0.25).clamp_(min=0).mul_(2).sub_(1).clamp_(max=4)

    def fused(x, y):
        y.copy_(torch.clamp((torch.clamp(x * 1.5 + 0.25, min=0) * 2) - 1, max=4))

    fn = eager if args.mode == "eager" else torch.compile(fused)
    start = time.perf_counter()
    fn(x, y)
    first = time.perf_counter() - start
    times = []
    for _ in range(common_args.WARMUP + common_args.STEPS):
        start = time.perf_counter()
        fn(x, y)
        times.append(time.perf_counter() - start)
    step_ms = median(times[common_args.WARMUP:]) * 1e3
    expected = torch.clamp((torch.clamp(x * 1.5 + 0.25, min=0) * 2) - 1, max=4)
    assert torch.allclose(y, expected), "the chain computed something else"
    common_args.report(args, "torch", step_ms,
                       (first * 1e3 - step_ms) if args.mode == "compile" else None)


if __name__ == "__main__":
    args = common_args.parse(("eager", "compile"))
    (chain if args.workload == "chain" else train)(args)
