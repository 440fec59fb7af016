// --local-redundancy: how the node-local copies of a checkpoint (local_copy.hpp) are protected
// against the loss of a host (local_redundancy.hpp). Internal to the library.
#pragma once

#include <string>
#include <string_view>

namespace epochrun {

struct LocalRedundancy {
  enum class Scheme { kNone, kPartner, kXor };
  Scheme scheme = Scheme::kNone;
  // kXor: how many hosts share one parity (2 or more; the last set of a job may differ by one).
  int set_size = 4;

  static constexpr int kDefaultSetSize = 4;
  static constexpr int kMaxSetSize = 64;

  bool none() const { return scheme == Scheme::kNone; }
  friend bool operator==(const LocalRedundancy&, const LocalRedundancy&) = default;
};

// "none", "partner", "xor" or "xor:N" (2 <= N <= 64). UsageError with one line naming the
// option and what it accepts otherwise.
LocalRedundancy parse_local_redundancy(std::string_view text);

// The option's text for `redundancy`, as parse_local_redundancy reads it ("xor:4").
std::string local_redundancy_name(const LocalRedundancy& redundancy);

}  // namespace epochrun
