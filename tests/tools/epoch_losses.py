#!/usr/bin/env python3
"""Checks a `smelt train` log: the training loss and the validation loss of the last epoch are
below the first epoch's by at least the given fraction. Usage: epoch_losses.py LOG FRACTION"""
import re
import sys

log, fraction = sys.argv[1], float(sys.argv[2])
epochs = [(float(m.group(1)), float(m.group(2)))
          for m in re.finditer(r"- loss: ([0-9.]+) .*- val_loss: ([0-9.]+)", open(log).read())]
if len(epochs) < 2:
    sys.exit(f"{log}: {len(epochs)} epoch lines with a loss and a validation loss")
(first_loss, first_val), (last_loss, last_val) = epochs[0], epochs[-1]
for name, first, last in (("loss", first_loss, last_loss), ("val_loss", first_val, last_val)):
    if not last < first * (1 - fraction):
        sys.exit(f"{name} fell from {first} to {last}: less than {fraction:.0%}")
print(f"loss {first_loss} -> {last_loss}, val_loss {first_val} -> {last_val} over {len(epochs)} epochs")
