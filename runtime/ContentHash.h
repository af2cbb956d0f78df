// SHA-256 of files Smelt loads code from, so a user can pin an AOT artifact to a known content
// hash: an artifact is native code, and its own checksums only catch damage, not substitution.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace smelt::rt {

/// The SHA-256 of `bytes` as 64 lowercase hex digits (OpenSSL's digest), as sha256sum prints it.
std::string sha256Hex(std::span<const uint8_t> bytes);
/// The same for the bytes of `parts` one after another (a file written in pieces); "" when
/// OpenSSL cannot allocate its context.
std::string sha256HexOfParts(const std::vector<std::span<const uint8_t>> &parts);

/// Success when `expected` (64 hex digits, either case) is the SHA-256 of `bytes`; otherwise an
/// error naming `what` (the file) and both hashes, or saying the pin is not a SHA-256.
Status checkSha256(std::span<const uint8_t> bytes, const std::string &expected,
                   const std::string &what);

} // namespace smelt::rt
