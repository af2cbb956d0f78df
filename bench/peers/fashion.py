"""Fashion-MNIST for the peers, read as Smelt reads it (data/Mnist.cpp): the training images
as float32 in [0, 1], [N, 784], and their labels, from SMELT_FASHION_MNIST_DIR or Debian's
dataset-fashion-mnist."""
import gzip
import os

import numpy as np


def load_train():
    root = os.environ.get("SMELT_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    with gzip.open(os.path.join(root, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(root, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images.astype(np.float32) / 255.0, labels.astype(np.int32)


def batches(images, labels, batch, steps, seed=0):
    """`steps` batches of one shuffled order (wrapping around), as an epoch of Smelt's
    Trainer feeds them: the gather of each batch is part of the step, as it is there."""
    order = np.random.default_rng(seed).permutation(len(labels))
    for step in range(steps):
        idx = order[(step * batch) % (len(labels) - batch):][:batch]
        yield images[idx], labels[idx]


def median(values):
    values = sorted(values)
    return values[len(values) // 2]
