"""Finds and edits an AOT artifact's CPU code, recomputing the checksums as a tampered file would,
from the header runtime/Artifact.h documents. The library's bytes come from `smelt dump` (its
cpu-kernels.so); the tool finds them in the artifact's data part. Usage:
artifact_tool.py holds IN LIBRARY                        exits 0 when LIBRARY is a 64-byte
                                                         aligned range of IN's data part
artifact_tool.py edit-cpu-code IN OUT LIBRARY OFFSET BYTE  sets byte OFFSET of that range"""
import struct
import sys
import zlib

HEADER = 64


def data_part(data):
    """(offset, size) of the data part: after the plan, at the next multiple of 64."""
    plan_size, data_size = struct.unpack_from("<QQ", data, 16)
    start = (HEADER + plan_size + 63) // 64 * 64
    return start, data_size


def library_at(data, library):
    """The file offset of `library` in the data part; exits when it is not there exactly once."""
    start, size = data_part(data)
    found = [i for i in range(start, start + size - len(library) + 1, 64)
             if data[i:i + len(library)] == library]
    if len(found) != 1:
        sys.exit(f"the library occurs {len(found)} times at 64-byte steps of the data part")
    return found[0]


def edit_cpu_code(src, dst, library, offset, value):
    data = bytearray(open(src, "rb").read())
    data[library_at(data, library) + offset] = value
    start, size = data_part(data)
    struct.pack_into("<I", data, 36, zlib.crc32(data[start:start + size]))
    struct.pack_into("<I", data, 40, zlib.crc32(data[:40]))
    open(dst, "wb").write(data)


if __name__ == "__main__":
    if sys.argv[1] == "holds":
        library_at(open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read())
    elif sys.argv[1] == "edit-cpu-code":
        edit_cpu_code(sys.argv[2], sys.argv[3], open(sys.argv[4], "rb").read(),
                      int(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit("unknown command " + sys.argv[1])
