// A complete job: each epoch every rank draws numbers from its own sequence; their sum and
// count over all ranks accumulate in a checkpointed blob; it stops after `epochs` epochs.
#include "epochrun/epoch_limiter.hpp"
#include "epochrun/job_registry.hpp"

namespace {

struct MeanOptions {
  std::int64_t epochs = 5;
  std::int64_t samples = 1000;
};

epochrun::Job make_running_mean(const MeanOptions& options) {
  epochrun::Job job("running_mean");
  auto totals = job.blob<double>("totals", {2}, {.output = true});  // sum, count
  auto draws = job.scalar<std::int64_t>("draws");                   // the generator's position
  epochrun::add_epoch_limiter(job, options.epochs);
  job.epoch_group.add("draw_and_reduce", [=](epochrun::TaskContext& ctx) {
    double epoch_totals[2] = {0.0, double(options.samples)};
    for (std::int64_t i = 0; i < options.samples; ++i) {
      const auto x = std::uint64_t(draws.of(ctx)++ + 1) * 0x9e3779b97f4a7c15ULL + ctx.comm.rank();
      epoch_totals[0] += double(x >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    }
    ctx.comm.allreduce(std::span(epoch_totals), epochrun::Reduction::kSum);
    totals.of(ctx)[0] += epoch_totals[0];
    totals.of(ctx)[1] += epoch_totals[1];
  });
  return job;
}

void declare_options(epochrun::JobOptions& options, MeanOptions& values) {
  options.add("epochs", &values.epochs, "epochs to run");
  options.add("samples", &values.samples, "numbers each rank draws per epoch");
}

}  // namespace

EPOCHRUN_REGISTER_JOB(running_mean, "the mean of numbers drawn on every rank",
                      epochrun::with_options<MeanOptions>(declare_options, make_running_mean));
