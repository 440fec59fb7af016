// The error class of a failed rank that gave up waiting for the others to agree on its failure.
// Internal to the library: the runner catches it and ends the job; a job never sees it.
#pragma once

#include "epochrun/errors.hpp"

namespace epochrun {

// They are most likely blocked in a collective call the failed rank will never make, and the
// job must end.
class AgreementTimeout : public Error {
 public:
  using Error::Error;
};

}  // namespace epochrun
