// The node-local copies the --local-dir tests look at: where a rank's copy of an epoch is, and
// a damaged byte in one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace epochrun::testing {

// Rank `rank`'s node-local copy of `epoch` under `cwd`/L.
inline std::filesystem::path copy_of(const std::filesystem::path& cwd, std::int64_t epoch,
                                     int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "epoch-%06lld.rank-%d.local", static_cast<long long>(epoch),
                rank);
  return cwd / "L" / name;
}

// Flips every bit of the first byte of `file` (a copy's first value starts there).
inline void damage_first_byte(const std::filesystem::path& file) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(stream.good()) << file;
  char byte = 0;
  stream.read(&byte, 1);
  byte = static_cast<char>(~byte);
  stream.seekp(0);
  stream.write(&byte, 1);
}

}  // namespace epochrun::testing
