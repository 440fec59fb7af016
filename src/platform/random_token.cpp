#include "random_token.hpp"

#include <cstdio>
#include <random>

namespace epochrun {

std::string random_token() {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  char digits[kRandomTokenDigits + 1];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(generator()));
  return digits;
}

}  // namespace epochrun
