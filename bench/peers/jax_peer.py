"""JAX's side of bench/peers (XLA:CPU): Smelt's seed models trained as a JAX user writes them,
one jitted step with Adam and the parameters donated, and the 6-op chain of
bench/fusion_chain.cpp jitted. Prints one JSON line (common_args.report); compile_ms is
lower + compile of the step, what jit costs before the first result.
  jax_peer.py mlp|cnn|chain jit [--batch 256]"""
import time

import jax
import jax.numpy as jnp
import numpy as np

import common_args
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


def dropout(x, key):
    keep = jax.random.bernoulli(key, 1 - DROPOUT, x.shape)
    return jnp.where(keep, x / (1 - DROPOUT), 0)


def logits_of(name, params, x, key):
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
    def loss_fn(params, x, y, key):
        logits = logits_of(name, params, x, key)
        loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))
        return loss, logits

    def step(params, m, v, t, x, y):
        key = jax.random.fold_in(jax.random.PRNGKey(101), t)
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, y, key)
        t = t + 1
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-7  # Smelt's Adam: Keras' defaults
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
        rate = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        params = jax.tree.map(lambda p, m, v: p - rate * m / (jnp.sqrt(v) + eps), params, m, v)
        acc = jnp.mean(jnp.argmax(logits, 1) == y)
        return params, m, v, t, loss, acc

    return jax.jit(step, donate_argnums=(0, 1, 2))


def train(args):
    params = init(args.workload, jax.random.PRNGKey(0))
    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    t = jnp.int32(0)
    images, labels = load_train()
    step = make_step(args.workload)
    start = time.perf_counter()
    step = step.lower(params, m, v, t, images[:args.batch], labels[:args.batch]).compile()
    compile_ms = (time.perf_counter() - start) * 1e3
    times = []
    last = time.perf_counter()
    for i, (x, y) in enumerate(batches(images, labels, args.batch,
                                       common_args.WARMUP + common_args.STEPS)):
        params, m, v, t, loss, acc = step(params, m, v, t, x, y)
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
