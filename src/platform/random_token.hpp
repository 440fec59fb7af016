// A fresh random name part: what makes a temporary file's name, a run's mark in the lock file
// and the shared-directory probe's name unique even between hosts whose pids coincide.
// Internal to the library.
#pragma once

#include <cstddef>
#include <string>

namespace epochrun {

inline constexpr std::size_t kRandomTokenDigits = 16;

// kRandomTokenDigits lowercase hexadecimal digits (64 random bits), from a generator seeded
// once per thread by std::random_device.
std::string random_token();

}  // namespace epochrun
