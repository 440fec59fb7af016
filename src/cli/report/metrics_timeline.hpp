// `epochrun report`'s timeline of a metrics log: per run, one lane per rank on a time axis,
// each epoch's work, the time the checkpoint blocked the job, the save (drawn beside the lane,
// since an asynchronous one runs under the next epoch) and the resume's load.
#pragma once

#include <string>

#include "report/run_metrics_log.hpp"

namespace epochrun::cli {

// The SVG document. Every epoch is a group with the id "run<R>-epoch<N>" (runs counted from
// 1 in the log's order) and a tooltip with its figures; every rank's bar has its own.
std::string render_timeline_svg(const MetricsLog& log, const std::string& title);

}  // namespace epochrun::cli
