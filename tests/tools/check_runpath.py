"""Every ELF file under the given folders (programs and shared libraries) has a RUNPATH and
RPATH of absolute folders or $ORIGIN-relative ones only: an empty entry is the current
directory, so a library planted where a user runs the program would load into it (a relative
entry is resolved from the current directory too).

    check_runpath.py DIR...   prints each offending file and entry; exit 1 if there is one
"""
import os
import re
import subprocess
import sys


def elf_files(folder):
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        yield path


def search_paths(path):
    """The RPATH and RUNPATH entries of `path`, from readelf's dynamic section."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    for kind, value in re.findall(r"\((RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out):
        for entry in value.split(":"):
            yield kind, entry


def main(folders):
    checked, bad = 0, 0
    for folder in folders:
        for path in elf_files(folder):
            checked += 1
            for kind, entry in search_paths(path):
                if not (entry.startswith("/") or entry.startswith("$ORIGIN")):
                    bad += 1
                    print(f"{path}: {kind} entry '{entry}' is "
                          f"{'empty (the current directory)' if not entry else 'relative'}")
    print(f"{checked} ELF files checked, {bad} empty or relative search path entries")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
