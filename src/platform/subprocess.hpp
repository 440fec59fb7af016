// Running a short-lived helper program and taking its output. Internal to the library.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace epochrun {

// Runs `argv` (argv[0] looked up in PATH), with its standard error discarded, and returns its
// standard output; nullopt when it cannot be started, fails (a non-zero exit or a signal) or
// does not finish within `timeout` (it is then killed). Returns within about `timeout`.
std::optional<std::string> command_output(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout);

}  // namespace epochrun
