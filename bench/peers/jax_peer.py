"""JAX's side of bench/peers (XLA:CPU): Smelt's seed models, its ResNet with batch norm (plain
pytrees, the moving averages threaded through the step as state), its char-level GPT and its char
LSTM (one lax.scan over the steps, as a JAX user writes a recurrence) trained as a
JAX user writes them, one jitted step with Adam and the parameters donated, and the 6-op chain
of bench/fusion_chain.cpp jitted. Prints one JSON line (common_args.report); compile_ms is
lower + compile of the step, what jit costs before the first result.
  jax_peer.py mlp|cnn|resnet|gpt|lstm|chain jit [--batch 256 (gpt: 32, lstm and resnet: 64)]"""
import time

import jax
import jax.numpy as jnp
import numpy as np

import common_args
import text
from fashion import batches, load_train, median

DROPOUT = 0.2


def glorot(key, shape, fan_in, fan_out):
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def init(name, key):
    """Parameters of the MLP or the CNN (NHWC and HWIO, Smelt's layouts), initialized as Smelt's
    builder does: Glorot-uniform kernels, zero biases."""
    keys = jax.random.split(key, 3)
    if name == "mlp":
        sizes = [784, 512, 256, 10]
        return [(glorot(k, (a, b), a, b), jnp.zeros(b)) for k, a, b in
                zip(keys, sizes[:-1], sizes[1:])]
    return [(glorot(keys[0], (3, 3, 1, 32), 9, 9 * 32), jnp.zeros(32)),
            (glorot(keys[1], (3, 3, 32, 64), 9 * 32, 9 * 64), jnp.zeros(64)),
            (glorot(keys[2], (3136, 10), 3136, 10), jnp.zeros(10))]


def dropout(x, key, rate=DROPOUT):
    keep = jax.random.bernoulli(key, 1 - rate, x.shape)
    return jnp.where(keep, x / (1 - rate), 0)


def gpt_init(key, vocab):
    """frontend/Gpt.cpp's parameters: Glorot-uniform kernels, zero biases, unit norm gains."""
    w = text.WIDTH
    keys = iter(jax.random.split(key, 8 * text.LAYERS + 2))
    dense = lambda a, b: (glorot(next(keys), (a, b), a, b), jnp.zeros(b))
    norm = lambda: (jnp.ones(w), jnp.zeros(w))
    blocks = [dict(norm1=norm(), q=dense(w, w), k=dense(w, w), v=dense(w, w), o=dense(w, w),
                   norm2=norm(), expand=dense(w, 4 * w), project=dense(4 * w, w))
              for _ in range(text.LAYERS)]
    return dict(embed=glorot(next(keys), (vocab, w), vocab, w), blocks=blocks, norm=norm(),
                logits=dense(w, vocab))


def lstm_init(key, vocab):
    """train::lstmModel's parameters: uniform(-0.05, 0.05) embeddings, Glorot-uniform kernels,
    zero biases; gates in Keras' order (input, forget, cell, output)."""
    e, u = text.LSTM_EMBED, text.LSTM_UNITS
    keys = jax.random.split(key, 4)
    return dict(embed=jax.random.uniform(keys[0], (vocab, e), jnp.float32, -0.05, 0.05),
                kernel=glorot(keys[1], (e, 4 * u), e, 4 * u),
                recurrent=glorot(keys[2], (u, 4 * u), u, 4 * u), bias=jnp.zeros(4 * u),
                logits=(glorot(keys[3], (u, vocab), u, vocab), jnp.zeros(vocab)))


def lstm_logits(params, tokens):
    b = tokens.shape[0]
    u = text.LSTM_UNITS
    inputs = params["embed"][tokens] @ params["kernel"] + params["bias"]  # [B, T, 4U]

    def cell(state, z):
        h, c = state
        z = z + h @ params["recurrent"]
        i, f, g, o = (z[:, k * u:(k + 1) * u] for k in range(4))
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((b, u))
    _, hs = jax.lax.scan(cell, (zeros, zeros), inputs.transpose(1, 0, 2))
    return hs.transpose(1, 0, 2) @ params["logits"][0] + params["logits"][1]


def he_normal(key, shape, fan_in):
    """He-normal weights: a normal of standard deviation sqrt(2 / fan_in)."""
    return jax.random.normal(key, shape, jnp.float32) * np.sqrt(2.0 / fan_in)


def resnet_init(key):
    """frontend/Models.cpp's resnetClassifier: a 3x3 stem of 16 filters, 3 stages of 2 blocks
    (16, 32, 64 filters, the first block of stages 1 and 2 at stride 2, a 1x1 shortcut where a
    block halves the image or changes the channels), global average pooling, dense 10. Returns
    its parameters (HWIO He-normal kernels, unit gammas, zero betas; a Glorot-uniform dense with
    a zero bias) and its state (zero moving means, unit moving variances), dicts keyed by the
    names Smelt gives its convBns ("stem", "stage0/block0/conv1", ...)."""
    keys = iter(jax.random.split(key, 20))
    params, state = {}, {}

    def conv_bn_init(name, c_in, filters, kernel):
        params[name] = dict(kernel=he_normal(next(keys), (kernel, kernel, c_in, filters),
                                             kernel * kernel * c_in),
                            gamma=jnp.ones(filters), beta=jnp.zeros(filters))
        state[name] = dict(mean=jnp.zeros(filters), var=jnp.ones(filters))

    conv_bn_init("stem", 1, 16, 3)
    channels = 16
    for s in range(3):
        filters = 16 << s
        for b in range(2):
            name = f"stage{s}/block{b}"
            stride = 2 if s > 0 and b == 0 else 1
            conv_bn_init(name + "/conv1", channels, filters, 3)
            conv_bn_init(name + "/conv2", filters, filters, 3)
            if channels != filters or stride != 1:
                conv_bn_init(name + "/shortcut", channels, filters, 1)
            channels = filters
    params["logits"] = (glorot(next(keys), (64, 10), 64, 10), jnp.zeros(10))
    return params, state


def conv_bn(x, p, s, stride, momentum=0.9, eps=1e-5):
    """frontend/Models.cpp's convBn in training mode: a bias-free convolution with TensorFlow's
    "SAME" padding, then batch norm over N, H and W with the batch's (population) statistics.
    Returns the output and the updated moving averages."""
    y = jax.lax.conv_general_dilated(x, p["kernel"], (stride, stride), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    mean = y.mean((0, 1, 2))
    var = ((y - mean) ** 2).mean((0, 1, 2))
    y = (y - mean) * jax.lax.rsqrt(var + eps) * p["gamma"] + p["beta"]
    return y, dict(mean=momentum * s["mean"] + (1 - momentum) * mean,
                   var=momentum * s["var"] + (1 - momentum) * var)


def resnet_logits(params, state, x):
    """The ResNet's logits on a batch of [B, 784] images (NHWC [B, 28, 28, 1]) and its new state,
    each batch norm's moving averages moved toward the batch's statistics."""
    new_state = {}

    def cbn(name, x, stride):
        y, new_state[name] = conv_bn(x, params[name], state[name], stride)
        return y

    x = jax.nn.relu(cbn("stem", x.reshape(-1, 28, 28, 1), 1))
    for s in range(3):
        filters = 16 << s
        for b in range(2):
            name = f"stage{s}/block{b}"
            stride = 2 if s > 0 and b == 0 else 1
            h = jax.nn.relu(cbn(name + "/conv1", x, stride))
            h = cbn(name + "/conv2", h, 1)
            shortcut = (x if x.shape[-1] == filters and stride == 1
                        else cbn(name + "/shortcut", x, stride))
            x = jax.nn.relu(h + shortcut)
    w, b = params["logits"]
    return x.mean((1, 2)) @ w + b, new_state


def layer_norm(x, gain_bias):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gain_bias[0] + gain_bias[1]


def gpt_logits(params, tokens, key):
    b, t = tokens.shape
    w, heads = text.WIDTH, text.HEADS
    keys = iter(jax.random.split(key, 3 * text.LAYERS + 1))
    x = dropout(params["embed"][tokens] + text.positions(), next(keys), text.DROPOUT)
    mask = jnp.tril(jnp.ones((t, t), bool))
    for blk in params["blocks"]:
        h = layer_norm(x, blk["norm1"])
        split = lambda p: (h @ p[0] + p[1]).reshape(b, t, heads, w // heads).transpose(0, 2, 1, 3)
        q, k, v = split(blk["q"]), split(blk["k"]), split(blk["v"])
        scores = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / np.sqrt(w // heads), -1e9)
        probs = dropout(jax.nn.softmax(scores, -1), next(keys), text.DROPOUT)
        a = (probs @ v).transpose(0, 2, 1, 3).reshape(b, t, w)
        x = x + dropout(a @ blk["o"][0] + blk["o"][1], next(keys), text.DROPOUT)
        h = layer_norm(x, blk["norm2"])
        h = jax.nn.gelu(h @ blk["expand"][0] + blk["expand"][1], approximate=True)
        x = x + dropout(h @ blk["project"][0] + blk["project"][1], next(keys), text.DROPOUT)
    x = layer_norm(x, params["norm"])
    return x @ params["logits"][0] + params["logits"][1]


def logits_of(name, params, x, key):
    if name == "gpt":
        return gpt_logits(params, x, key)
    if name == "lstm":
        return lstm_logits(params, x)
    keys = jax.random.split(key, 2)
    if name == "mlp":
        for i, (w, b) in enumerate(params[:-1]):
            x = dropout(jax.nn.relu(x @ w + b), keys[i])
        w, b = params[-1]
        return x @ w + b
    x = x.reshape(-1, 28, 28, 1)
    for w, b in params[:2]:
        x = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x + b)
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = dropout(x.reshape(x.shape[0], -1), keys[0])
    w, b = params[-1]
    return x @ w + b


def make_step(name):
    """One jitted training step: (params, state, m, v, t, x, y) -> (params, state, m, v, t, loss,
    accuracy), Adam's update; `state` (the ResNet's moving averages, empty for the others) is
    what the step carries besides the gradients. The parameters, the state and Adam's moments are
    donated."""
    def loss_fn(params, state, x, y, key):
        if name == "resnet":
            logits, state = resnet_logits(params, state, x)
        else:
            logits = logits_of(name, params, x, key)
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), y[..., None], -1)
        return -jnp.mean(picked), (logits, state)

    def step(params, state, m, v, t, x, y):
        key = jax.random.fold_in(jax.random.PRNGKey(101), t)
        (loss, (logits, state)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, state, x, y, key)
        t = t + 1
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-7  # Smelt's Adam: Keras' defaults
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        rate = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        params = jax.tree.map(lambda p, m, v: p - rate * m / (jnp.sqrt(v) + eps), params, m, v)
        acc = jnp.mean(jnp.argmax(logits, -1) == y)
        return params, state, m, v, t, loss, acc

    return jax.jit(step, donate_argnums=(0, 1, 2, 3))


def train(args):
    state = {}
    if args.workload == "gpt":
        images, labels, vocab = text.load_windows()
        params = gpt_init(jax.random.PRNGKey(0), vocab)
    elif args.workload == "lstm":
        images, labels, vocab = text.load_windows(text.LSTM_CONTEXT)
        params = lstm_init(jax.random.PRNGKey(0), vocab)
    elif args.workload == "resnet":
        images, labels = load_train()
        params, state = resnet_init(jax.random.PRNGKey(0))
    else:
        images, labels = load_train()
        params = init(args.workload, jax.random.PRNGKey(0))
    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    t = jnp.int32(0)
    step = make_step(args.workload)
    start = time.perf_counter()
    step = step.lower(params, state, m, v, t, images[:args.batch],
                      labels[:args.batch]).compile()
    compile_ms = (time.perf_counter() - start) * 1e3
    times = []
    last = time.perf_counter()
    for i, (x, y) in enumerate(batches(images, labels, args.batch,
                                       common_args.WARMUP + common_args.STEPS)):
        params, state, m, v, t, loss, acc = step(params, state, m, v, t, x, y)
        float(loss)  # the step's results are read, as Smelt's trainer reads its metrics
        now = time.perf_counter()
        if i >= common_args.WARMUP:
            times.append(now - last)
        last = now
    common_args.report(args, "jax", median(times) * 1e3, compile_ms)


def chain(args):
    x = jax.random.uniform(jax.random.PRNGKey(7), (1 << 24,), jnp.float32, -2, 2)
    fn = jax.jit(lambda x: jnp.minimum(jnp.maximum(x * 1.5 + 0.25, 0) * 2 - 1, 4))
    start = time.perf_counter()
    fn = fn.lower(x).compile()
    compile_ms = (time.perf_counter() - start) * 1e3
    times = []
    for _ in range(common_args.WARMUP + common_args.STEPS):
        start = time.perf_counter()
        fn(x).block_until_ready()
        times.append(time.perf_counter() - start)
    y = np.asarray(fn(x))
    expected = np.minimum(np.maximum(np.asarray(x) * 1.5 + 0.25, 0) * 2 - 1, 4)
    assert np.allclose(y, expected), "the chain computed something else"
    common_args.report(args, "jax", median(times[common_args.WARMUP:]) * 1e3, compile_ms)


if __name__ == "__main__":
    args = common_args.parse(("jit",))
    (chain if args.workload == "chain" else train)(args)
