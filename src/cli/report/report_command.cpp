// `epochrun report DIR [-o FILE.svg]`: the timeline of the runs recorded in DIR/metrics.jsonl,
// as an SVG any browser shows (tooltips carry every figure), and a few lines of medians per run
// on stdout. Needs no MPI.
#include <algorithm>
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "bench/median.hpp"
#include "command_line.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "report/metrics_timeline.hpp"
#include "report/run_metrics_log.hpp"
#include "run_metrics.hpp"
#include "subcommand_options.hpp"

namespace epochrun::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct ReportOptions {
  std::string directory;
  std::string output = "timeline.svg";
};

std::optional<ReportOptions> parse_report_options(int argc, char** argv) {
  ReportOptions o;
  po::options_description options(
      "epochrun report DIR [options]: a timeline of the runs recorded in DIR/metrics.jsonl");
  options.add_options()("help,h", "print this help")("output,o",
                                                     po::value(&o.output)->default_value(o.output),
                                                     "the SVG file to write; - for stdout")(
      "dir", po::value(&o.directory), "checkpoint directory");
  po::positional_options_description positional;
  positional.add("dir", 1);
  if (!parse_subcommand(argc, argv, options, positional)) {
    return std::nullopt;
  }
  if (o.directory.empty()) {
    throw UsageError("report needs a checkpoint directory: epochrun report DIR [-o FILE.svg]");
  }
  if (o.output.empty()) {
    throw UsageError("-o needs a file name (or - for stdout)");
  }
  return o;
}

// Per run: the medians over its epochs of the slowest rank's figures.
void print_summary(std::ostream& out, const MetricsLog& log) {
  int number = 0;
  for (const auto& run : log.runs) {
    std::vector<double> work, blocked, save;
    std::uint64_t peak_rss = 0;
    for (const auto& epoch : run.epochs) {
      double w = 0, b = 0, s = 0;
      for (const auto& r : epoch.ranks) {
        w = std::max(w, r.epoch_seconds.value_or(0));
        b = std::max(b, r.blocked_seconds.value_or(0));
        s = std::max(s, r.save_seconds.value_or(0));
        peak_rss = std::max(peak_rss, r.peak_rss_bytes.value_or(0));
      }
      work.push_back(w);
      blocked.push_back(b);
      save.push_back(s);
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "run %d%s%s: %zu epochs on %d ranks; medians of the slowest rank: work %.3f s, "
                  "blocked %.3f s, save %.3f s; peak RSS %.1f MB\n",
                  ++number, run.started.empty() ? "" : ", started ", run.started.c_str(),
                  run.epochs.size(), run.num_ranks(), median(work), median(blocked), median(save),
                  double(peak_rss) / 1e6);
    out << line;
  }
}

}  // namespace

int report_command(int argc, char** argv) {
  try {
    const auto options = parse_report_options(argc, argv);
    if (!options) {
      return exit_status(ExitCode::kSuccess);
    }
    std::error_code error;
    if (!fs::is_directory(options->directory, error)) {
      throw UsageError("'" + options->directory + "' is not a directory");
    }
    const auto file = fs::path(options->directory) / kMetricsFileName;
    const auto log = read_metrics_log(file);
    if (log.damaged_lines > 0) {
      std::cerr << "epochrun: warning: skipped " << log.damaged_lines << " damaged line(s) of "
                << file.string() << "\n";
    }
    const auto svg = render_timeline_svg(log, "epochrun: " + file.string());
    if (options->output == "-") {
      std::cout << svg;
      return exit_status(ExitCode::kSuccess);
    }
    try {
      write_file_atomically(options->output, svg);
    } catch (const std::exception& failure) {
      throw UsageError("-o " + options->output + ": " + failure.what());
    }
    print_summary(std::cout, log);
    std::cout << "timeline written to " << options->output << "\n";
    return exit_status(ExitCode::kSuccess);
  } catch (const std::exception& error) {
    return report_failure(error);
  }
}

}  // namespace epochrun::cli
