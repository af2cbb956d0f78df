// SHA-256 of files Smelt loads code from, so a user can pin an AOT artifact to a known content
// hash: an artifact is native code, and its own checksums only catch damage, not substitution.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::rt {

/// The SHA-256 of `bytes` as 64 lowercase hex digits (OpenSSL's digest), as sha256sum prints it.
std::string sha256Hex(const std::vector<uint8_t> &bytes);

/// Success when `expected` (64 hex digits, either case) is the SHA-256 of `bytes`; otherwise an
/// error naming `what` (the file) and both hashes, or saying the pin is not a SHA-256.
Status checkSha256(const std::vector<uint8_t> &bytes, const std::string &expected,
                   const std::string &what);

} // namespace smelt::rt
