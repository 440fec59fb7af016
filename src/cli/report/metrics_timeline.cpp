#include "report/metrics_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/svg_writer.hpp"

namespace epochrun::cli {
namespace {

constexpr double kWidth = 1100;
constexpr double kLeft = 80;  // room for the lane labels
constexpr double kRight = 20;
constexpr double kLane = 18;
constexpr double kLaneGap = 8;
constexpr double kRunHeader = 44;  // the run's title and the epoch labels
constexpr double kAxis = 34;
constexpr double kLegend = 30;

constexpr const char* kStyle =
    "text{font-family:sans-serif;font-size:11px;fill:#222}"
    ".title{font-size:15px;font-weight:bold}.run{font-size:12px;font-weight:bold}"
    ".epoch-label{font-size:9px;fill:#555}"
    ".work{fill:#4e79a7}.blocked{fill:#e15759}.save{fill:#f28e2b}.load{fill:#59a14f}"
    ".axis{stroke:#888;stroke-width:1}.tick{stroke:#ccc;stroke-width:1}";

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

std::string seconds(const std::optional<double>& value) {
  return value ? format("%.3f s", *value) : "-";
}

std::string megabytes(const std::optional<std::uint64_t>& value) {
  return value ? format("%.1f MB", double(*value) / 1e6) : "-";
}

std::string rank_title(const RankFigures& r, std::int64_t epoch) {
  return "rank " + std::to_string(r.rank) + ", epoch " + std::to_string(epoch) + ": work " +
         seconds(r.epoch_seconds) + ", blocked " + seconds(r.blocked_seconds) + ", save " +
         seconds(r.save_seconds) + " (" + megabytes(r.save_bytes) + "), peak RSS " +
         megabytes(r.peak_rss_bytes);
}

// Where each rank's epochs start: one after another, each taking its work and the time its
// checkpoint blocked the job; the load (a resume) comes first.
struct Placement {
  std::vector<std::vector<double>> start;  // [epoch][rank]
  double end = 0;                          // the latest instant drawn
};

Placement place(const LoggedRun& run, int ranks) {
  Placement placement;
  std::vector<double> now(static_cast<std::size_t>(ranks), 0.0);
  if (run.load) {
    for (const auto& r : run.load->ranks) {
      if (r.rank >= 0 && r.rank < ranks) {
        now[static_cast<std::size_t>(r.rank)] = r.load_seconds.value_or(0);
      }
    }
  }
  for (const auto& epoch : run.epochs) {
    placement.start.push_back(now);
    for (const auto& r : epoch.ranks) {
      if (r.rank < 0 || r.rank >= ranks) {
        continue;
      }
      auto& t = now[static_cast<std::size_t>(r.rank)];
      const double work = r.epoch_seconds.value_or(0);
      placement.end = std::max(placement.end, t + work + r.save_seconds.value_or(0));
      t += work + r.blocked_seconds.value_or(0);
      placement.end = std::max(placement.end, t);
    }
  }
  for (double t : now) {
    placement.end = std::max(placement.end, t);
  }
  placement.end = std::max(placement.end, 1e-3);
  return placement;
}

// A tick spacing of 1, 2 or 5 times a power of ten giving about eight ticks.
double tick_step(double span) {
  const double raw = span / 8;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (raw <= factor * power) {
      return factor * power;
    }
  }
  return 10 * power;
}

double run_height(int ranks) {
  return kRunHeader + ranks * (kLane + kLaneGap) + kAxis;
}

void draw_legend(SvgWriter& svg, double y) {
  double x = kLeft;
  for (const auto& [css, label] : std::vector<std::pair<const char*, const char*>>{
           {"work", "epoch work"},
           {"blocked", "job blocked by the checkpoint"},
           {"save", "save (asynchronous: under the next epoch)"},
           {"load", "load (resume)"}}) {
    svg.rect(x, y - 9, 12, 10, css);
    svg.text(x + 16, y, label, "legend");
    x += 36 + 6.2 * static_cast<double>(std::string_view(label).size());
  }
}

// Where a run is drawn: its top, its time scale (pixels per second) and its lanes.
struct RunFrame {
  double top = 0;
  double scale = 1;
  int ranks = 0;
  double x(double t) const { return kLeft + t * scale; }
  double lane_y(int rank) const { return top + kRunHeader + rank * (kLane + kLaneGap); }
};

// The run's title line and its lanes' labels.
void draw_heading(SvgWriter& svg, const LoggedRun& run, int number, const RunFrame& frame) {
  std::string heading = "run " + std::to_string(number) +
                        (run.started.empty() ? "" : ", started " + run.started) + ": " +
                        std::to_string(run.epochs.size()) + " epochs on " +
                        std::to_string(frame.ranks) + " ranks";
  if (run.load) {
    heading += ", resumed from epoch " + std::to_string(run.load->epoch);
  }
  svg.text(kLeft, frame.top + 16, heading, "run");
  for (int rank = 0; rank < frame.ranks; ++rank) {
    svg.text(kLeft - 8, frame.lane_y(rank) + kLane * 0.7, "rank " + std::to_string(rank), "lane",
             "end");
  }
}

// The load of a resumed run, at the start of every lane.
void draw_load(SvgWriter& svg, const LoggedRun& run, int number, const RunFrame& frame) {
  if (!run.load) {
    return;
  }
  svg.begin_group("run" + std::to_string(number) + "-load", "load",
                  "load of epoch " + std::to_string(run.load->epoch));
  for (const auto& r : run.load->ranks) {
    svg.rect(frame.x(0), frame.lane_y(r.rank), r.load_seconds.value_or(0) * frame.scale, kLane,
             "load",
             "rank " + std::to_string(r.rank) + ": load " + seconds(r.load_seconds) + " (" +
                 megabytes(r.load_bytes) + ")");
  }
  svg.end_group();
}

// One epoch's bars on each rank's lane from its start: work, blocked, and the save under them.
void draw_epoch_bars(SvgWriter& svg, const LoggedEpoch& epoch, const std::vector<double>& starts,
                     const RunFrame& frame) {
  for (const auto& r : epoch.ranks) {
    if (r.rank < 0 || r.rank >= frame.ranks) {
      continue;
    }
    const double t = starts[static_cast<std::size_t>(r.rank)];
    const double work = r.epoch_seconds.value_or(0);
    const double y = frame.lane_y(r.rank);
    const auto tooltip = rank_title(r, epoch.epoch);
    svg.rect(frame.x(t), y, work * frame.scale, kLane, "work", tooltip);
    if (r.blocked_seconds) {
      svg.rect(frame.x(t + work), y, *r.blocked_seconds * frame.scale, kLane, "blocked", tooltip);
    }
    if (r.save_seconds) {
      svg.rect(frame.x(t + work), y + kLane + 1, *r.save_seconds * frame.scale, 4, "save", tooltip);
    }
  }
}

// Every epoch as a group of bars, labelled with its number where the label has room.
void draw_epochs(SvgWriter& svg, const LoggedRun& run, int number, const Placement& placement,
                 const RunFrame& frame) {
  double last_label = -1e9;
  for (std::size_t i = 0; i < run.epochs.size(); ++i) {
    const auto& epoch = run.epochs[i];
    const auto& starts = placement.start[i];
    std::string title = "epoch " + std::to_string(epoch.epoch);
    if (epoch.committed) {
      title += *epoch.committed ? " (checkpoint committed)" : " (checkpoint failed)";
    }
    svg.begin_group("run" + std::to_string(number) + "-epoch" + std::to_string(epoch.epoch),
                    "epoch", title);
    draw_epoch_bars(svg, epoch, starts, frame);
    const double label_x = frame.x(starts.empty() ? 0 : starts[0]);
    if (label_x - last_label >= 22) {  // no overlapping labels when epochs are short
      svg.text(label_x, frame.top + kRunHeader - 4, std::to_string(epoch.epoch), "epoch-label");
      last_label = label_x;
    }
    svg.end_group();
  }
}

// The time axis under the lanes, from 0 to `end` seconds.
void draw_time_axis(SvgWriter& svg, const RunFrame& frame, double end) {
  const double axis_y = frame.lane_y(frame.ranks) + 2;
  svg.line(kLeft, axis_y, kWidth - kRight, axis_y, "axis");
  const double step = tick_step(end);
  for (double t = 0; t <= end * 1.0001; t += step) {
    svg.line(frame.x(t), axis_y, frame.x(t), axis_y + 5, "axis");
    svg.text(frame.x(t), axis_y + 17, format(step < 1 ? "%.2f s" : "%.0f s", t), "tick-label",
             "middle");
  }
}

void draw_run(SvgWriter& svg, const LoggedRun& run, int number, double top) {
  const int ranks = run.num_ranks();
  const auto placement = place(run, ranks);
  const RunFrame frame{top, (kWidth - kLeft - kRight) / placement.end, ranks};
  draw_heading(svg, run, number, frame);
  draw_load(svg, run, number, frame);
  draw_epochs(svg, run, number, placement, frame);
  draw_time_axis(svg, frame, placement.end);
}

}  // namespace

std::string render_timeline_svg(const MetricsLog& log, const std::string& title) {
  double height = 30 + kLegend;
  for (const auto& run : log.runs) {
    height += run_height(run.num_ranks());
  }
  SvgWriter svg(kWidth, height);
  svg.text(kLeft, 20, title, "title");
  draw_legend(svg, 20 + kLegend - 8);
  double top = 30 + kLegend;
  int number = 0;
  for (const auto& run : log.runs) {
    draw_run(svg, run, ++number, top);
    top += run_height(run.num_ranks());
  }
  return svg.finish(kStyle);
}

}  // namespace epochrun::cli
