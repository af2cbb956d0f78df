// A reader's check against what is not a regular file: a directory, a FIFO with no writer
// (whose blocking open would hang) and /dev/zero (which never ends) must each be refused at
// once, the message naming the path ("<path>: is a ..., not a regular file").
#pragma once

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <string>

namespace smelt::test {

/// Makes `directory` and `fifo`, expects `errorOf(path)` (the reader's error, "" when it read
/// the path) to refuse each of them and /dev/zero, then removes both.
inline void expectNotRegularFilesRefused(
    const std::string &directory, const std::string &fifo,
    const std::function<std::string(const std::string &)> &errorOf) {
  std::filesystem::create_directory(directory);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string &path : {directory, fifo, std::string("/dev/zero")}) {
    std::string message = errorOf(path);
    ASSERT_FALSE(message.empty()) << path << " was read";
    EXPECT_EQ(message.rfind(path + ": is a", 0), 0u) << message;
    EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
  }
  std::filesystem::remove(directory);
  std::filesystem::remove(fifo);
}

} // namespace smelt::test
