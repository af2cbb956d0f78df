"""The text workloads' data for the peers, as bench/TextWorkloads.h builds it: the characters of
Debian's fortunes literature ($SMELT_TEXT overrides) as ids in byte order, in windows of 64
(the GPT) or 32 (the LSTM) starting every 16 characters, each labelled with the next ones; and
the models' shapes."""
import os

import numpy as np

CONTEXT, WIDTH, LAYERS, HEADS, DROPOUT, BATCH = 64, 128, 4, 4, 0.1, 32
# The char LSTM (train/BuiltinModels.h): 32 steps, embedding 64, 128 units, batch 64.
LSTM_CONTEXT, LSTM_EMBED, LSTM_UNITS, LSTM_BATCH = 32, 64, 128, 64


def load_windows(context=CONTEXT):
    path = os.environ.get("SMELT_TEXT") or "/usr/share/games/fortunes/literature"
    data = np.frombuffer(open(path, "rb").read(), np.uint8)
    symbols = np.unique(data)
    ids = np.searchsorted(symbols, data).astype(np.int32)
    starts = np.arange(0, len(ids) - context, 16)
    examples = np.stack([ids[s:s + context] for s in starts])
    labels = np.stack([ids[s + 1:s + context + 1] for s in starts])
    return examples, labels, len(symbols)


def positions():
    """The sinusoidal encoding of frontend/Layers.cpp: [CONTEXT, WIDTH]."""
    p = np.arange(CONTEXT)[:, None]
    i = np.arange(WIDTH)[None, :]
    angle = p * np.exp((i - i % 2) * (-np.log(10000.0) / WIDTH))
    return np.where(i % 2, np.cos(angle), np.sin(angle)).astype(np.float32)
