#include "local_redundancy_options.hpp"

#include <charconv>

#include "epochrun/errors.hpp"

namespace epochrun {

LocalRedundancy parse_local_redundancy(std::string_view text) {
  const auto refuse = [&] {
    throw UsageError("--local-redundancy must be none, partner, xor or xor:SET_SIZE (2 to " +
                     std::to_string(LocalRedundancy::kMaxSetSize) + " hosts a set), got '" +
                     std::string(text) + "'");
  };
  if (text == "none") {
    return {};
  }
  if (text == "partner") {
    return {LocalRedundancy::Scheme::kPartner, LocalRedundancy::kDefaultSetSize};
  }
  if (text == "xor") {
    return {LocalRedundancy::Scheme::kXor, LocalRedundancy::kDefaultSetSize};
  }
  constexpr std::string_view prefix = "xor:";
  if (!text.starts_with(prefix)) {
    refuse();
  }
  const auto digits = text.substr(prefix.size());
  int size = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || size < 2 ||
      size > LocalRedundancy::kMaxSetSize) {
    refuse();
  }
  return {LocalRedundancy::Scheme::kXor, size};
}

std::string local_redundancy_name(const LocalRedundancy& redundancy) {
  switch (redundancy.scheme) {
    case LocalRedundancy::Scheme::kNone:
      return "none";
    case LocalRedundancy::Scheme::kPartner:
      return "partner";
    case LocalRedundancy::Scheme::kXor:
      break;
  }
  return "xor:" + std::to_string(redundancy.set_size);
}

}  // namespace epochrun
