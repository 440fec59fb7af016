// Logging setup: rank 0 logs progress; other ranks speak only on warnings and errors, and
// every line names its rank. The logger itself (spdlog) stays inside the library.
#pragma once

#include <string>

#include "epochrun/export.hpp"

namespace epochrun {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace", "debug", "info", "warn", "error", "off"; UsageError otherwise.
EPOCHRUN_API LogLevel parse_log_level(const std::string& text);
// Logs to stderr. Ranks other than 0 never log below warn. May be called again (a later run of
// the same process): the last call's rank and level hold.
EPOCHRUN_API void configure_logging(int rank, LogLevel level);

}  // namespace epochrun
