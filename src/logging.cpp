#include "epochrun/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include <map>

#include "epochrun/errors.hpp"

namespace epochrun {

spdlog::level::level_enum parse_log_level(const std::string& text) {
  // Our own names: spdlog's differ between versions ("warn" is "warning" in 1.10).
  static const std::map<std::string, spdlog::level::level_enum> kLevels = {
      {"trace", spdlog::level::trace},  {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},    {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
      {"off", spdlog::level::off}};
  auto found = kLevels.find(text);
  if (found == kLevels.end()) {
    throw UsageError("invalid log level '" + text +
                     "' (expected trace, debug, info, warn, error or off)");
  }
  return found->second;
}

void configure_logging(int rank, spdlog::level::level_enum level) {
  auto logger = spdlog::stderr_logger_mt("epochrun-rank-" + std::to_string(rank));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%l] %v");
  logger->set_level(rank == 0 ? level : std::max(level, spdlog::level::warn));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace epochrun
