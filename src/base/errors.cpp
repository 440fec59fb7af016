#include "epochrun/errors.hpp"

namespace epochrun {

ExitCode exit_code_for(const std::exception& error) {
  if (const auto* known = dynamic_cast<const Error*>(&error)) {
    return known->exit_code();
  }
  return ExitCode::kJobFailed;
}

}  // namespace epochrun
