#include "epochrun/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>

#include "epochrun/errors.hpp"

namespace epochrun {

spdlog::level::level_enum parse_log_level(const std::string& text) {
  for (auto level : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
                     spdlog::level::warn, spdlog::level::err, spdlog::level::off}) {
    auto name = spdlog::level::to_string_view(level);
    if (text == std::string_view(name.data(), name.size()) ||
        (level == spdlog::level::warn && text == "warning") ||
        (level == spdlog::level::err && text == "error")) {
      return level;
    }
  }
  throw UsageError("invalid log level '" + text +
                   "' (expected trace, debug, info, warn, error or off)");
}

void configure_logging(int rank, spdlog::level::level_enum level) {
  auto logger = spdlog::stderr_logger_mt("epochrun-rank-" + std::to_string(rank));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%l] %v");
  logger->set_level(rank == 0 ? level : std::max(level, spdlog::level::warn));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace epochrun
