"""PyTorch's side of bench/peers: Smelt's seed models (train/BuiltinModels.cpp: the MLP, the CNN
and the ResNet with batch norm), its
char-level GPT (frontend/Gpt.cpp) and its char LSTM (nn.LSTM) trained as a PyTorch user writes them, eager or under
torch.compile, and the 6-op elementwise chain of bench/fusion_chain.cpp. Prints one JSON line
(common_args.report).
  torch_peer.py mlp|cnn|resnet|gpt|lstm|chain eager|compile [--batch 256 (gpt: 32, lstm and
  resnet: 64)]
  torch_peer.py resnet fit: examples/resnet.cpp's training run, its held-out accuracy per seed"""
import json
import time

import torch
import torch.nn.functional as F
from torch import nn

import common_args
import text
from fashion import batches, load_train, median


class Block(nn.Module):
    """Pre-norm: x + drop(attention(norm1(x))), then x + drop(mlp(norm2(x))); causal
    attention with separate query, key, value and output projections, as frontend/Gpt.cpp."""

    def __init__(self):
        super().__init__()
        w = text.WIDTH
        self.norm1, self.norm2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q, self.k, self.v, self.o = (nn.Linear(w, w) for _ in range(4))
        self.expand, self.project = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)
        self.drop = nn.Dropout(text.DROPOUT)

    def forward(self, x):
        b, t, w = x.shape
        h = self.norm1(x)
        split = lambda y: y.view(b, t, text.HEADS, w // text.HEADS).transpose(1, 2)
        a = F.scaled_dot_product_attention(split(self.q(h)), split(self.k(h)), split(self.v(h)),
                                           dropout_p=text.DROPOUT if self.training else 0,
                                           is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, w)))
        h = self.project(F.gelu(self.expand(self.norm2(x)), approximate="tanh"))
        return x + self.drop(h)


class Gpt(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, text.WIDTH)
        self.register_buffer("positions", torch.from_numpy(text.positions()))
        self.blocks = nn.Sequential(*(Block() for _ in range(text.LAYERS)))
        self.norm = nn.LayerNorm(text.WIDTH)
        self.logits = nn.Linear(text.WIDTH, vocab)
        self.drop = nn.Dropout(text.DROPOUT)

    def forward(self, tokens):
        x = self.drop(self.embed(tokens) + self.positions)
        return self.logits(self.norm(self.blocks(x)))


class CharLstm(nn.Module):
    """train::lstmModel: embedding, one LSTM layer over every step, logits at every step."""

    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, text.LSTM_EMBED)
        self.lstm = nn.LSTM(text.LSTM_EMBED, text.LSTM_UNITS, batch_first=True)
        self.logits = nn.Linear(text.LSTM_UNITS, vocab)

    def forward(self, tokens):
        return self.logits(self.lstm(self.embed(tokens))[0])


class ResidualBlock(nn.Module):
    """relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)), the shortcut a strided 1x1
    convolution with batch norm where the block halves the image or changes the channels."""

    def __init__(self, channels, filters, stride):
        super().__init__()
        self.conv1 = conv_bn(channels, filters, 3, stride)
        self.conv2 = conv_bn(filters, filters, 3, 1)
        self.shortcut = (nn.Identity() if channels == filters and stride == 1
                         else conv_bn(channels, filters, 1, stride))

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))) + self.shortcut(x))


def conv_bn(channels, filters, kernel, stride):
    """A convolution without bias and its batch norm, as frontend/Models.cpp's convBn: momentum
    0.9 (PyTorch's 0.1), epsilon 1e-5. 'Same' padding: (k - 1) / 2 on each side, which for these
    kernels and even image sizes is TensorFlow's rule at stride 1 and covers the same outputs at
    stride 2."""
    return nn.Sequential(nn.Conv2d(channels, filters, kernel, stride, (kernel - 1) // 2,
                                   bias=False),
                         nn.BatchNorm2d(filters, eps=1e-5, momentum=0.1))


def resnet():
    """frontend/Models.cpp's resnetClassifier: a 3x3 stem of 16 filters, 3 stages of 2 blocks
    (16, 32, 64 filters), global average pooling, dense 10. NCHW, PyTorch's layout."""
    layers = [nn.Unflatten(1, (1, 28, 28)), conv_bn(1, 16, 3, 1), nn.ReLU()]
    channels = 16
    for s in range(3):
        for b in range(2):
            layers.append(ResidualBlock(channels, 16 << s, 2 if s > 0 and b == 0 else 1))
            channels = 16 << s
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    model = nn.Sequential(*layers)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")  # He normal, fan in
        elif isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def seed_model(name):
    """The MLP (784-512-256-10, relu, dropout 0.2) or the CNN (conv 32 and 64, 3x3 same, relu,
    2x2 max pooling, dropout 0.2, dense 10), Glorot-uniform kernels and zero biases as Smelt's
    builder initializes them. The CNN is NCHW, PyTorch's layout."""
    if name == "resnet":
        return resnet()
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
    if args.workload == "gpt":
        examples, labels, vocab = text.load_windows()
        model = Gpt(vocab)
    elif args.workload == "lstm":
        examples, labels, vocab = text.load_windows(text.LSTM_CONTEXT)
        model = CharLstm(vocab)
    else:
        model = seed_model(args.workload)
        examples, labels = load_train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)  # Keras' epsilon, as Smelt

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, -2), y.flatten())
        loss.backward()
        opt.step()
        return loss.detach(), (logits.argmax(-1) == y).float().mean()

    if args.mode == "compile":
        step = torch.compile(step)
    times, first = [], None
    last = time.perf_counter()
    for i, (x, y) in enumerate(batches(examples, labels, args.batch,
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


def fit(args):
    """examples/resnet.cpp's run in PyTorch: the same model on the same 6000 training images,
    3 epochs of shuffled batches of 64 (the last one short), Adam at 1e-3, then the accuracy on
    the same 1000 held-out images in evaluation mode (the running averages), for seeds 0-4."""
    images, labels = load_train()
    x, y = torch.from_numpy(images[:6000]), torch.from_numpy(labels[:6000]).long()
    held_x, held_y = torch.from_numpy(images[6000:7000]), torch.from_numpy(labels[6000:7000])
    for seed in range(5):
        torch.manual_seed(seed)
        model = seed_model(args.workload)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        for _epoch in range(3):
            model.train()
            for idx in torch.randperm(len(y)).split(args.batch):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x[idx]), y[idx]).backward()
                opt.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(held_x).argmax(-1) == held_y).float().mean().item()
        print(json.dumps({"peer": "torch fit", "workload": args.workload, "seed": seed,
                          "val_accuracy": accuracy}), flush=True)


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
    args = common_args.parse(("eager", "compile", "fit"))
    (chain if args.workload == "chain" else fit if args.mode == "fit" else train)(args)
