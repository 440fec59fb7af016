#include "cli/command_line.hpp"

#include <boost/program_options/errors.hpp>
#include <cstdlib>
#include <iostream>

#include "epochrun/errors.hpp"

namespace epochrun::cli {

int launcher_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) {
      return std::atoi(value);
    }
  }
  return 0;
}

void print_error(const std::string& message) {
  if (launcher_rank() != 0) {
    return;
  }
  std::string line = message;
  for (auto& c : line) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  std::cerr << "epochrun: error: " << line << std::endl;
}

int report_failure(const std::exception& error) {
  print_error(error.what());
  if (dynamic_cast<const boost::program_options::error*>(&error) != nullptr) {
    return static_cast<int>(ExitCode::kUsageError);
  }
  return static_cast<int>(exit_code_for(error));
}

}  // namespace epochrun::cli
