#include "epochrun/retention.hpp"

#include <algorithm>
#include <string>

#include "epochrun/errors.hpp"

namespace epochrun {

std::vector<std::int64_t> RetentionPolicy::epochs_to_delete(
    const std::vector<std::int64_t>& committed, std::int64_t just_committed) const {
  if (keeps_everything()) {
    return {};
  }
  std::vector<std::int64_t> older;
  for (auto epoch : committed) {
    if (epoch < just_committed) {
      older.push_back(epoch);
    }
  }
  std::sort(older.begin(), older.end());
  // `just_committed` is one of the K newest; the K - 1 newest older ones complete them.
  const auto newest_to_keep = static_cast<std::size_t>(keep_last.value_or(1) - 1);
  std::vector<std::int64_t> doomed;
  for (std::size_t i = 0; i < older.size(); ++i) {
    const bool among_newest = older.size() - i <= newest_to_keep;
    const bool snapshot = keep_every && older[i] % *keep_every == 0;
    if (!among_newest && !snapshot) {
      doomed.push_back(older[i]);
    }
  }
  return doomed;
}

void validate(const RetentionPolicy& policy) {
  if (policy.keep_last && *policy.keep_last < 1) {
    throw UsageError("--keep-last must be at least 1, got " + std::to_string(*policy.keep_last));
  }
  if (policy.keep_every && *policy.keep_every < 1) {
    throw UsageError("--keep-every must be at least 1, got " + std::to_string(*policy.keep_every));
  }
}

}  // namespace epochrun
