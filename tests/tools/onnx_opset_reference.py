"""Float64 NumPy references for tests/tools/onnx_opset_ops.py, written from the ONNX operator
spec (onnx/docs/Operators.md of ONNX 1.23) of the ops and versions that opsets 18-28 added or
changed: each function takes and returns NumPy arrays, computes in float64 and leaves the
rounding to the caller."""
import math

import numpy as np


def erf(x):
    return np.vectorize(math.erf)(x)


def gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def group_norm(x, scale, bias, groups, epsilon, per_channel):
    """GroupNormalization: statistics over each group of channels and the spatial positions;
    scale and bias one a channel (opset 21) or one a group (opset 18)."""
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + epsilon)).reshape(x.shape)
    if not per_channel:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * scale.reshape(shape) + bias.reshape(shape)


def rms_norm(x, scale, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + epsilon) * scale


def layer_norm(x, scale, bias, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mu = x.mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axes, keepdims=True) + epsilon) * scale + bias


def rotary(x, cos, sin, position_ids=None, interleaved=False, dim=0, heads=0):
    """RotaryEmbedding: x [B, H, S, D] or [B, S, H*D]; caches [P, R/2] with position_ids, else
    [B, S, R/2]. Pairs (x1, x2) rotate to (x1 cos - x2 sin, x1 sin + x2 cos)."""
    h = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(x.shape[0], x.shape[1], heads, -1)
    dim = dim or h.shape[-1]
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    part = h[..., :dim]
    x1, x2 = (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)
    real, imaginary = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    if interleaved:
        rotated = np.stack([real, imaginary], axis=-1).reshape(part.shape)
    else:
        rotated = np.concatenate([real, imaginary], axis=-1)
    out = np.concatenate([rotated, h[..., dim:]], axis=-1)
    return out.reshape(x.shape) if x.ndim == 3 else out.transpose(0, 2, 1, 3)


def attention(q, k, v, mask=None, past=None, nonpad=None, scale=None, causal=False,
              q_heads=None, kv_heads=None, softcap=0.0, window=(-1, -1)):
    """Attention-23/24/25 from its spec: heads split from 3-D inputs, the past concatenated,
    a bias of 0 and -inf from a bool mask (a float mask added), the causal frontier j <= i +
    offset and the window around offset + i, padding keys past nonpad_kv_seqlen, key/value
    heads repeated for grouped queries, softmax(softcap(q k^T scale) + bias) v, and rows with no
    allowed key zero. Returns Y, present K, present V and the four qk_matmul_output modes."""
    three_d = q.ndim == 3
    if three_d:
        split = lambda t, heads: t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(0, 2, 1, 3)
        q, k, v = split(q, q_heads), split(k, kv_heads), split(v, kv_heads)
    offset = 0
    if past is not None:
        offset = past[0].shape[2]
        k, v = np.concatenate([past[0], k], 2), np.concatenate([past[1], v], 2)
    sq, skv = q.shape[2], k.shape[2]
    bias = np.zeros((sq, skv))
    if mask is not None:
        mask = np.concatenate([mask, np.full(mask.shape[:-1] + (skv - mask.shape[-1],),
                                             False if mask.dtype == bool else -np.inf)], -1)
        bias = bias + (np.where(mask, 0, -np.inf) if mask.dtype == bool else mask)
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    position = i + offset
    if nonpad is not None:
        position = (i + (nonpad - sq)[:, None, None])[:, None]  # [B, 1, Sq, 1]
        bias = bias + np.where(j < nonpad[:, None, None, None], 0, -np.inf)
    allowed = np.ones(np.broadcast(position, j).shape, bool)
    if causal:
        allowed &= j <= position
    if window[0] >= 0:
        allowed &= j >= position - window[0]
    if window[1] >= 0:
        allowed &= j <= position + window[1]
    bias = bias + np.where(allowed, 0, -np.inf)
    groups = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, groups, 1), np.repeat(v, groups, 1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    raw = q @ kk.transpose(0, 1, 3, 2) * scale
    capped = softcap * np.tanh(raw / softcap) if softcap > 0 else raw
    scores = capped + bias
    blocked = np.isneginf(np.broadcast_to(bias, scores.shape).max(-1, keepdims=True))
    top = np.where(blocked, 0, scores.max(-1, keepdims=True))
    e = np.where(blocked, 0, np.exp(scores - top))
    p = e / np.where(blocked, 1, e.sum(-1, keepdims=True))
    y = p @ vv
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return y, k, v, (raw, capped, scores, p)


def cubic_kernel(a, t):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a if t < 2 else 0.0


def resize_axis(x, axis, out, scale, mode, transform="half_pixel", antialias=False, a=-0.75):
    """Resize-19 along one axis, linear or cubic: each output's coordinate by the transform, the
    kernel (widened by 1 / scale when antialiasing a downscale) on the nearest taps, edges
    clamped, weights normalized as the spec's antialias does."""
    x = np.moveaxis(x, axis, -1)
    size, width = x.shape[-1], scale * x.shape[-1]
    reach = 2 if mode == "cubic" else 1
    stretch = min(scale, 1.0) if antialias else 1.0
    result = []
    for o in range(out):
        if transform == "half_pixel_symmetric":
            c = size / 2 * (1 - out / width) + (o + 0.5) / scale - 0.5
        else:
            c = (o + 0.5) / scale - 0.5
        base = math.floor(c)
        taps = range(base - math.ceil(reach / stretch) + 1, base + math.ceil(reach / stretch) + 1)
        weights = []
        for t in taps:
            d = abs(c - t) * stretch
            weights.append(cubic_kernel(a, d) if mode == "cubic" else max(0.0, 1 - d))
        weights = np.array(weights) / (sum(weights) if antialias else 1)
        picks = np.clip(np.array(list(taps)), 0, size - 1)
        result.append((x[..., picks] * weights).sum(-1))
    return np.moveaxis(np.stack(result, -1), -1, axis)
