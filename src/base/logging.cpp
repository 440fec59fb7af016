#include "epochrun/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <map>

#include "epochrun/errors.hpp"

namespace epochrun {

LogLevel parse_log_level(const std::string& text) {
  static const std::map<std::string, LogLevel> kLevels = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug},  {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
      {"off", LogLevel::kOff}};
  auto found = kLevels.find(text);
  if (found == kLevels.end()) {
    throw UsageError("invalid log level '" + text +
                     "' (expected trace, debug, info, warn, error or off)");
  }
  return found->second;
}

namespace {

// Our own names map onto spdlog's: those differ between versions ("warn" is "warning" in 1.10).
spdlog::level::level_enum spdlog_level(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void configure_logging(int rank, LogLevel level) {
  const auto name = "epochrun-rank-" + std::to_string(rank);
  // A process that runs several jobs (an embedding program, a Python script's second
  // epochrun.run) configures its logger again: spdlog refuses a second logger of one name.
  spdlog::drop(name);
  auto logger = spdlog::stderr_logger_mt(name);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%l] %v");
  logger->set_level(rank == 0 ? spdlog_level(level)
                              : std::max(spdlog_level(level), spdlog::level::warn));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace epochrun
