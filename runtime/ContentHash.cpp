// SHA-256 through OpenSSL's EVP interface (ContentHash.h).
#include "runtime/ContentHash.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>

namespace smelt::rt {

std::string sha256Hex(const std::vector<uint8_t> &bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // EVP_Digest fails only when OpenSSL cannot allocate its context.
  if (!EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr))
    return "";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

Status checkSha256(const std::vector<uint8_t> &bytes, const std::string &expected,
                   const std::string &what) {
  if (expected.size() != 64 ||
      !std::all_of(expected.begin(), expected.end(), [](unsigned char c) { return std::isxdigit(c); }))
    return Status::error(fmt::format("the expected SHA-256 '{}' is not 64 hex digits", expected));
  std::string lower = expected;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  std::string actual = sha256Hex(bytes);
  if (actual.empty())
    return Status::error(what + ": OpenSSL could not compute its SHA-256");
  if (actual != lower)
    return Status::error(fmt::format("{}: its SHA-256 is {}, not the expected {}; refusing to load "
                                     "it (an artifact is native code: load only the file you "
                                     "pinned)",
                                     what, actual, lower));
  return Status();
}

} // namespace smelt::rt
