#include "epochrun/job_registry.hpp"

#include <algorithm>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"

namespace epochrun {

JobRegistry& JobRegistry::instance() {
  static JobRegistry registry;
  return registry;
}

void JobRegistry::add(JobRegistration registration) {
  validate_name(registration.name, "job name");
  if (find(registration.name) != nullptr) {
    throw Error("job '" + registration.name + "' is registered twice");
  }
  registrations_.push_back(std::move(registration));
}

const JobRegistration* JobRegistry::find(const std::string& name) const {
  auto found = std::find_if(registrations_.begin(), registrations_.end(),
                            [&](const JobRegistration& entry) { return entry.name == name; });
  return found == registrations_.end() ? nullptr : &*found;
}

std::vector<const JobRegistration*> JobRegistry::all() const {
  std::vector<const JobRegistration*> entries;
  for (const auto& entry : registrations_) {
    entries.push_back(&entry);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  return entries;
}

}  // namespace epochrun
