"""Edits an AOT artifact's CPU code and recomputes every checksum, as a tampered file would be,
from the format runtime/Artifact.h documents. Usage:
artifact_tool.py edit-cpu-code IN OUT OFFSET BYTE   sets byte OFFSET of the shared library
artifact_tool.py cpu-code IN OUT                     writes the shared library to OUT"""
import struct
import sys
import zlib


def cpu_code_span(data):
    """(offset, length) of the shared library in the cpu section (kind 5: u32 n, n x (u32
    length, symbol), u64 length, library), or None without one."""
    for i in range(struct.unpack_from("<I", data, 16)[0]):
        kind, _, start, _ = struct.unpack_from("<IIQQ", data, 32 + 24 * i)
        if kind != 5:
            continue
        at = start + 4
        for _ in range(struct.unpack_from("<I", data, start)[0]):
            at += 4 + struct.unpack_from("<I", data, at)[0]
        return at + 8, struct.unpack_from("<Q", data, at)[0]
    return None


def edit_cpu_code(src, dst, offset, value):
    data = bytearray(open(src, "rb").read())
    library, _ = cpu_code_span(data)
    data[library + offset] = value
    count = struct.unpack_from("<I", data, 16)[0]
    for i in range(count):
        entry = 32 + 24 * i
        _, _, start, size = struct.unpack_from("<IIQQ", data, entry)
        struct.pack_into("<I", data, entry + 4, zlib.crc32(data[start:start + size]))
    table_end = 32 + 24 * count
    header = bytearray(data[:table_end])
    struct.pack_into("<I", header, 20, 0)
    struct.pack_into("<I", data, 20, zlib.crc32(header))
    open(dst, "wb").write(data)


if __name__ == "__main__":
    if sys.argv[1] == "edit-cpu-code":
        edit_cpu_code(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "cpu-code":
        data = open(sys.argv[2], "rb").read()
        start, length = cpu_code_span(data)
        open(sys.argv[3], "wb").write(data[start:start + length])
    else:
        sys.exit("unknown command " + sys.argv[1])
