"""Test helper for long elementwise chains (issue 21): writes a .mlir whose function applies n
elementwise ops in one chain (add x, mul x, tanh, sub x, repeated), and checks `smelt run`'s
output against the same chain in float64 NumPy."""
import sys
import numpy as np

SHAPE = (4, 33)  # 132 elements: a vector loop and a scalar tail
OPS = ("add", "mul", "tanh", "sub")


def generate(n, path):
    n = int(n)
    t = "tensor<%dx%dxf32>" % SHAPE
    lines = ['func.func @main(%%x: %s {smelt.name = "x"}) -> (%s {smelt.name = "y"}) {' % (t, t)]
    last = "%x"
    for i in range(n):
        op = OPS[i % len(OPS)]
        operands = last if op == "tanh" else "%s, %%x" % last
        lines.append("  %%v%d = smelt.%s %s : %s" % (i, op, operands, t))
        last = "%%v%d" % i
    lines += ["  return %s : %s" % (last, t), "}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def check(n, dir):
    x = np.load(f"{dir}/x.npy").astype(np.float64)
    y = x.copy()
    for i in range(int(n)):
        op = OPS[i % len(OPS)]
        y = {"add": lambda: y + x, "mul": lambda: y * x, "tanh": lambda: np.tanh(y),
             "sub": lambda: y - x}[op]()
    got = np.load(f"{dir}/out/y.npy")
    assert got.dtype == np.float32 and got.shape == SHAPE, (got.dtype, got.shape)
    err = float(np.linalg.norm(got - y) / np.linalg.norm(y))
    assert err < 1e-5, err
    print("chain OK", err)


if __name__ == "__main__":
    {"generate": generate, "check": check}[sys.argv[1]](*sys.argv[2:])
