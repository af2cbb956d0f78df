"""Test helper for the checkpoint lit tests: damages a safetensors checkpoint in place, as a
bad disk or a careless hand would.
  edit_checkpoint.py flip FILE             flips one bit of the last data byte
  edit_checkpoint.py meta FILE KEY VALUE   sets __metadata__[KEY] to VALUE (a JSON literal),
                                           keeping the header well-formed"""
import json
import struct
import sys

mode, path = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
if mode == "flip":
    data[-1] ^= 0x10
elif mode == "meta":
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header["__metadata__"][sys.argv[3]] = json.loads(sys.argv[4])
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    data = struct.pack("<Q", len(text)) + text + data[8 + length:]
else:
    sys.exit(f"unknown mode {mode}")
open(path, "wb").write(data)
