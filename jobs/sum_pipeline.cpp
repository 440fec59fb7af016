#include "sum_pipeline.hpp"

#include <numeric>
#include <vector>

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
  job.init_group.add("create_reader_and_total", [options](TaskContext& context) {
    std::vector<std::int64_t> values(static_cast<std::size_t>(options.num_items));
    std::iota(values.begin(), values.end(), 0);
    auto& workspace = context.workspace;
    workspace.put(kSumValues, Blob::of<std::int64_t>({values.size()}, values));
    workspace.put(kSumCursor, Blob::scalar<std::int64_t>(0));
    const std::int64_t total[] = {options.initial_total};
    workspace.put(kSumTotal, Blob::of<std::int64_t>({1}, total));
    workspace.put(kSumExhausted, Blob::scalar<std::int32_t>(0));
  });
  // The reference's ReaderWithLimit: up to items_per_epoch reads; a read past the end marks
  // the reader exhausted, which is the stop signal.
  job.epoch_group.add("read_and_add", [options](TaskContext& context) {
    auto& workspace = context.workspace;
    auto values = workspace.get(kSumValues).as<std::int64_t>();
    auto& cursor = workspace.get(kSumCursor).item<std::int64_t>();
    auto& total = workspace.get(kSumTotal).item<std::int64_t>();
    auto& exhausted = workspace.get(kSumExhausted).item<std::int32_t>();
    for (std::int64_t read = 0; read < options.items_per_epoch; ++read) {
      if (cursor >= static_cast<std::int64_t>(values.size())) {
        exhausted = 1;
        break;
      }
      total += values[static_cast<std::size_t>(cursor++)];
    }
  });
  job.add_stop_condition("reader_exhausted", [](const Workspace& workspace) {
    return workspace.get(kSumExhausted).item<std::int32_t>() != 0;
  });
  job.expect_blob(kSumValues, DType::kI64, {static_cast<std::uint64_t>(options.num_items)});
  job.expect_blob(kSumCursor, DType::kI64, {});
  job.expect_blob(kSumTotal, DType::kI64, {1});
  job.expect_blob(kSumExhausted, DType::kI32, {});
  // The data and the starting total; items_per_epoch may change.
  job.declare_run_defining_option("num_items");
  job.declare_run_defining_option("initial_total");
  job.declare_output(kSumTotal);
  return job;
}

namespace {

class SumPipelineDefinition : public JobDefinition {
 public:
  void add_options(boost::program_options::options_description& options,
                   const std::string& prefix) override {
    namespace po = boost::program_options;
    options.add_options()((prefix + "num_items").c_str(),
                          po::value(&options_.num_items)->default_value(options_.num_items),
                          "values each reader holds")(
        (prefix + "items_per_epoch").c_str(),
        po::value(&options_.items_per_epoch)->default_value(options_.items_per_epoch),
        "values read per epoch")(
        (prefix + "initial_total").c_str(),
        po::value(&options_.initial_total)->default_value(options_.initial_total),
        "the total before the first epoch");
  }
  Job build() const override { return make_sum_pipeline(options_); }

 private:
  SumPipelineOptions options_;
};

const RegisterJob kRegistration({"sum_pipeline",
                                 "the reference pipeline: sum 0..9 three an epoch into 100 "
                                 "(totals 103, 115, 136, 145)",
                                 [] { return std::make_unique<SumPipelineDefinition>(); }});

}  // namespace
}  // namespace epochrun::jobs
