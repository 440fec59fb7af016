#include "sum_pipeline.hpp"

#include <numeric>

#include "epochrun/errors.hpp"
#include "epochrun/job_registry.hpp"

namespace epochrun::jobs {

Job make_sum_pipeline(const SumPipelineOptions& options) {
  if (options.num_items < 0 || options.num_items > 100'000'000) {
    throw UsageError("sum_pipeline.num_items must be in [0, 100000000], got " +
                     std::to_string(options.num_items));
  }
  if (options.items_per_epoch < 1) {
    throw UsageError("sum_pipeline.items_per_epoch must be at least 1, got " +
                     std::to_string(options.items_per_epoch));
  }
  Job job("sum_pipeline");
  auto values = job.blob<std::int64_t>(kSumValues, {std::uint64_t(options.num_items)});
  auto cursor = job.scalar<std::int64_t>(kSumCursor);
  auto total = job.blob<std::int64_t>(kSumTotal, {1}, {.output = true});
  auto exhausted = job.scalar<std::int32_t>(kSumExhausted);
  job.init_group.add("create_reader_and_total", [=](TaskContext& context) {
    std::iota(values.of(context).begin(), values.of(context).end(), 0);
    total.of(context)[0] = options.initial_total;
  });
  // The reference's ReaderWithLimit: up to items_per_epoch reads; a read past the end marks
  // the reader exhausted, which is the stop signal.
  job.epoch_group.add("read_and_add", [=](TaskContext& context) {
    auto& next = cursor.of(context);
    for (std::int64_t read = 0; read < options.items_per_epoch; ++read) {
      if (next >= std::int64_t(values.of(context).size())) {
        exhausted.of(context) = 1;
        break;
      }
      total.of(context)[0] += values.of(context)[std::size_t(next++)];
    }
  });
  job.add_stop_condition("reader_exhausted",
                         [=](const Workspace& workspace) { return exhausted.of(workspace) != 0; });
  // The data and the starting total; items_per_epoch may change.
  job.declare_run_defining_option("num_items");
  job.declare_run_defining_option("initial_total");
  return job;
}

namespace {

void declare_options(JobOptions& options, SumPipelineOptions& values) {
  options.add("num_items", &values.num_items, "values each reader holds");
  options.add("items_per_epoch", &values.items_per_epoch, "values read per epoch");
  options.add("initial_total", &values.initial_total, "the total before the first epoch");
}

EPOCHRUN_REGISTER_JOB(sum_pipeline,
                      "the reference pipeline: sum 0..9 three an epoch into 100 "
                      "(totals 103, 115, 136, 145)",
                      with_options<SumPipelineOptions>(declare_options, make_sum_pipeline));

}  // namespace
}  // namespace epochrun::jobs
