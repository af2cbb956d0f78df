// What the file-reading fuzz targets share: the readers take a path, so each input is written
// to one file of this process's own, and every error must name that file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include <unistd.h>

namespace smelt::fuzz {

[[noreturn]] inline void failWith(const char *target, const char *what,
                                  const std::string &message) {
  std::fprintf(stderr, "%s: %s: %s\n", target, what, message.c_str());
  std::abort();
}

/// This process's input file (in /dev/shm when it exists: no disk writes per run).
inline std::string inputPath(const char *suffix) {
  return std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/smelt-fuzz-" +
         std::to_string(getpid()) + suffix;
}

/// Writes `data` to this process's input file and returns its path.
inline std::string writeInput(const uint8_t *data, size_t size, const char *suffix) {
  std::string path = inputPath(suffix);
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
    failWith("fuzz", "cannot write the input file", path);
  return path;
}

/// Aborts (a finding) unless `message` starts with `path`.
inline void expectNamesFile(const char *target, const std::string &message,
                            const std::string &path) {
  if (message.rfind(path, 0) != 0)
    failWith(target, "an error that does not name the file", message);
}

/// Writes the input to this process's file and reads it with `read` (path -> rt::Expected):
/// the value, or nullopt once the error is checked to name the file.
template <typename Read>
auto readInput(const char *target, const uint8_t *data, size_t size, const char *suffix,
               Read read) -> std::optional<std::decay_t<decltype(*read(std::string()))>> {
  std::string path = writeInput(data, size, suffix);
  auto result = read(path);
  if (!result.ok()) {
    expectNamesFile(target, result.message(), path);
    return std::nullopt;
  }
  return std::move(*result);
}

/// `value` written by `write` (path, value -> rt::Status) beside the input file and read back
/// by `read`; a finding when either fails.
template <typename T, typename Write, typename Read>
T writeAndReadBack(const char *target, const T &value, const char *suffix, Write write,
                   Read read) {
  std::string path = inputPath(suffix) + ".again";
  auto written = write(path, value);
  if (!written.ok())
    failWith(target, "read but not writable", written.message());
  auto reread = read(path);
  std::remove(path.c_str());
  if (!reread.ok())
    failWith(target, "written but not readable", reread.message());
  return std::move(*reread);
}

} // namespace smelt::fuzz
