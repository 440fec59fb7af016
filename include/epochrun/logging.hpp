// Logging setup: rank 0 logs progress; other ranks speak only on warnings and errors, and
// every line names its rank.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace epochrun {

// "trace", "debug", "info", "warn", "error", "off"; UsageError otherwise.
spdlog::level::level_enum parse_log_level(const std::string& text);
// Logs to stderr. Ranks other than 0 never log below warn.
void configure_logging(int rank, spdlog::level::level_enum level);

}  // namespace epochrun
