// SHA-256 through OpenSSL's EVP interface (ContentHash.h).
#include "runtime/ContentHash.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace smelt::rt {

std::string sha256Hex(std::span<const uint8_t> bytes) { return sha256HexOfParts({bytes}); }

std::string sha256HexOfParts(const std::vector<std::span<const uint8_t>> &parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // These fail only when OpenSSL cannot allocate.
  bool ok = context && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  for (std::span<const uint8_t> part : parts)
    ok = ok && EVP_DigestUpdate(context.get(), part.data(), part.size());
  if (!ok || !EVP_DigestFinal_ex(context.get(), digest, &length))
    return "";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

Status checkSha256(std::span<const uint8_t> bytes, const std::string &expected,
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
