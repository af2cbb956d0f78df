// Checks an AOT artifact's CPU code, a shared library held as bytes, before the dynamic loader
// sees it: the loader trusts the ELF structures it reads, so a damaged image could make it
// read or write outside the mapping (SIGSEGV, SIGBUS) or run code while loading (SIGILL).
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <vector>

namespace smelt::rt {

/// Accepts only what Smelt's linker step produces (codegen/cpu/SharedLibrary.cpp): a 64-bit
/// little-endian ET_DYN image for this machine whose every structure the loader reads lies
/// inside the image and agrees with its neighbours, and which runs none of its own code when
/// loaded:
///  - header, program headers and section headers within the bytes; segments PT_LOAD (ordered,
///    disjoint, none both writable and executable, file bytes within the image), one
///    PT_DYNAMIC and PT_NOTE, PT_PHDR, PT_GNU_* inside loaded memory; no interpreter, no TLS,
///    no executable stack;
///  - dynamic entries of known tags only: no constructors or destructors (DT_INIT*, DT_FINI*,
///    DT_PREINIT_ARRAY), no search paths, filters or audit libraries, no text relocations,
///    needed libraries only libc, libm and libmvec;
///  - string, symbol, hash (SysV and GNU: every bucket and chain in range, chains that end)
///    and version tables inside loaded file bytes; symbols naming strings in the string
///    table, defined ones inside loaded memory, functions inside executable segments, no
///    IFUNC or TLS symbols;
///  - relocations of the plain kinds (absolute, relative, GOT, PLT) that write into writable
///    segments and name symbols that exist.
/// What it cannot check is what the code does: a .smelt file is native code and is trusted
/// like a shared library (pin its hash to load only a known file, see Artifact.h).
/// Errors read "the CPU code's ELF image, byte <N>: <what>".
Status checkElfImage(const std::vector<uint8_t> &image);

} // namespace smelt::rt
