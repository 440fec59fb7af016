// A checkpoint resumed on another number of ranks, as a user does it: `mpiexec -n N epochrun run
// ... --resume-from-epoch latest` with another N. heat_diffusion's field is a global array, so a
// run started on 4 ranks and resumed on 2 and then on 3 ends bit-identical to uninterrupted runs
// on 1 and on 4; sgd_regression's blobs are replicated, so such a resume ends within the job's
// stated tolerance of an uninterrupted run at the new count; sum_pipeline's per-node blobs have
// no rule for another rank count, so such a resume is refused with exit code 3 and one line
// naming them. Every mpiexec is bounded (kRunSeconds).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "launch.hpp"
#include "sgd_regression.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr double kRunSeconds = 120;

// `epochrun run args...` on `ranks` ranks in `cwd`, bounded.
ProcessResult run_on(int ranks, std::vector<std::string> args, const std::filesystem::path& cwd) {
  args.insert(args.begin(), "run");
  return run_within(epochrun_on_ranks(ranks, args), cwd, kRunSeconds);
}

// Debian's python3 (h5py, numpy) running `script` with `args`, bounded; its stdout.
std::string python(const std::string& script, const std::vector<std::string>& args,
                   const std::filesystem::path& cwd) {
  std::vector<std::string> argv = {SYSTEM_PYTHON, "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = run_within(argv, cwd, kRunSeconds, {});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return result.out;
}

// The whole heat_diffusion field of each checkpoint file, one line each: the path, the shape
// ("37x23") and the hex of its f64 bytes, row-major. The field is read from /arrays/field
// (format 3: the global array as one dataset) or, in a file of the per-node layout, assembled
// from each node's block over the job's process grid (as MPI_Dims_create balances two
// dimensions: the largest divisor <= sqrt(ranks) columns).
constexpr const char* kFieldScript = R"(
import h5py, math, sys, numpy
def split(n, p, k):
    base, extra = divmod(n, p)
    return k * base + min(k, extra), base + (1 if k < extra else 0)
def field(path):
    with h5py.File(path, "r") as f:
        if "arrays/field" in f:
            return f["arrays/field"][...]
        nodes = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["node_names"]]
        ranks = len(nodes)
        columns_of_grid = max(d for d in range(1, math.isqrt(ranks) + 1) if ranks % d == 0)
        grid = (ranks // columns_of_grid, columns_of_grid)
        parts = [f["nodes/%s/field" % node][...] for node in nodes]
        rows = sum(parts[r * grid[1]].shape[0] for r in range(grid[0]))
        columns = sum(parts[c].shape[1] for c in range(grid[1]))
        whole = numpy.empty((rows, columns), dtype=numpy.float64)
        for rank, part in enumerate(parts):
            r0, nr = split(rows, grid[0], rank // grid[1])
            c0, nc = split(columns, grid[1], rank % grid[1])
            assert part.shape == (nr, nc), (path, rank, part.shape, nr, nc)
            whole[r0:r0 + nr, c0:c0 + nc] = part
        return whole
for path in sys.argv[1:]:
    cells = numpy.ascontiguousarray(field(path), dtype="<f8")
    print(path, "x".join(map(str, cells.shape)), cells.tobytes().hex())
)";

std::vector<std::string> heat_options(const std::string& directory, const std::string& summary) {
  // 37 x 23: blocks of unequal sizes on 2, 3 and 4 ranks (4: a 2 x 2 process grid).
  return {"--job",
          "heat_diffusion",
          "--log-level",
          "warn",
          "--checkpoint-dir",
          directory,
          "--heat_diffusion.rows",
          "37",
          "--heat_diffusion.columns",
          "23",
          "--heat_diffusion.sweeps_per_epoch",
          "5",
          "--heat_diffusion.max_epochs",
          "9",
          "--heat_diffusion.tolerance",
          "0",
          "--heat_diffusion.output_file",
          summary};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(RankChange, HeatDiffusionResumedOn4Then2Then3RanksIsBitIdenticalTo1And4) {
  ScratchDir cwd;
  auto one = run_on(1, heat_options("one", "one.json"), cwd.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto four = run_on(4, heat_options("four", "four.json"), cwd.path());
  ASSERT_EQ(four.exit_code, 0) << four.err;

  // Epochs 1-3 on 4 ranks, 4-6 on 2, 7-9 on 3 (--num-epochs is the last epoch to run).
  auto first = run_on(4, with(heat_options("moved", ""), {"--num-epochs", "3"}), cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto second = run_on(
      2, with(heat_options("moved", ""), {"--resume-from-epoch", "latest", "--num-epochs", "6"}),
      cwd.path());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto third = run_on(3,
                      with(heat_options("moved", "moved.json"),
                           {"--resume-from-epoch", "latest", "--summary-json", "moved-run.json"}),
                      cwd.path());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  const auto run = nlohmann::json::parse(read_file(cwd / "moved-run.json"));
  EXPECT_EQ(run["resumed_from"], 6);
  EXPECT_EQ(run["last_epoch"], 9);

  std::istringstream fields(python(kFieldScript,
                                   {"one/epoch-000009.h5", "four/epoch-000009.h5",
                                    "moved/epoch-000009.h5", "moved/epoch-000003.h5"},
                                   cwd.path()));
  std::map<std::string, std::string> field;
  std::string path;
  std::string shape;
  std::string hex;
  while (fields >> path >> shape >> hex) {
    EXPECT_EQ(shape, "37x23") << path;
    field[path] = hex;
  }
  ASSERT_EQ(field.size(), 4u) << fields.str().substr(0, 400);
  EXPECT_EQ(field["four/epoch-000009.h5"], field["one/epoch-000009.h5"])
      << "4 ranks uninterrupted differ from 1";
  EXPECT_EQ(field["moved/epoch-000009.h5"], field["one/epoch-000009.h5"])
      << "4 -> 2 -> 3 ranks differ from 1";
  EXPECT_NE(field["moved/epoch-000003.h5"], field["one/epoch-000009.h5"]) << "no sweep ran";

  // The summaries, the mean included, are the same bits too (JSON prints doubles exactly).
  const auto reference = nlohmann::json::parse(read_file(cwd / "one.json"));
  for (const auto* name : {"four.json", "moved.json"}) {
    auto summary = nlohmann::json::parse(read_file(cwd / name));
    EXPECT_NE(summary["ranks"], reference["ranks"]) << name;
    for (const auto* key : {"epoch", "sweeps", "max_change", "mean", "max", "min"}) {
      EXPECT_EQ(summary[key], reference[key]) << name << " " << key;
    }
  }
}

std::vector<std::string> sgd_options(const std::string& directory, const std::string& model) {
  return {"--job",
          "sgd_regression",
          "--log-level",
          "warn",
          "--checkpoint-dir",
          directory,
          "--sgd_regression.features",
          "8",
          "--sgd_regression.samples",
          "1000",
          "--sgd_regression.batches_per_epoch",
          "16",
          "--sgd_regression.max_epochs",
          "8",
          "--sgd_regression.loss_threshold",
          "0",
          "--sgd_regression.model_file",
          model};
}

// The largest relative difference between two exported models' parameters (weights and bias).
constexpr const char* kModelDifferenceScript = R"(
import h5py, numpy, sys
def model(path):
    with h5py.File(path, "r") as f:
        return numpy.concatenate([f["weights"][...], [f["bias"][()]]])
a, b = model(sys.argv[1]), model(sys.argv[2])
assert a.shape == b.shape, (a.shape, b.shape)
print(repr(float(numpy.max(numpy.abs(a - b) / numpy.maximum(numpy.abs(a), numpy.abs(b))))))
)";

TEST(RankChange, SgdRegressionResumedOnAnotherRankCountIsWithinItsStatedTolerance) {
  ScratchDir cwd;
  auto uninterrupted = run_on(2, sgd_options("two", "two.h5"), cwd.path());
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;

  auto first =
      run_on(4, with(sgd_options("moved", "unused.h5"), {"--num-epochs", "3"}), cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed = run_on(2,
                        with(sgd_options("moved", "moved.h5"),
                             {"--resume-from-epoch", "latest", "--summary-json", "moved.json"}),
                        cwd.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto run = nlohmann::json::parse(read_file(cwd / "moved.json"));
  EXPECT_EQ(run["resumed_from"], 3);
  EXPECT_EQ(run["last_epoch"], 8);

  const double difference =
      std::stod(python(kModelDifferenceScript, {"two.h5", "moved.h5"}, cwd.path()));
  EXPECT_LE(difference, jobs::kSgdRankChangeTolerance);
}

TEST(RankChange, SumPipelineResumedOnAnotherRankCountIsRefusedNamingItsBlobs) {
  ScratchDir cwd;
  const std::vector<std::string> options = {"--job", "sum_pipeline", "--checkpoint-dir", "D"};
  auto first = run_on(3, with(options, {"--num-epochs", "2"}), cwd.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto files_before = list_directory(cwd / "D");

  auto refused = run_on(2, with(options, {"--resume-from-epoch", "latest", "--summary-json", "S"}),
                        cwd.path());
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  const auto lines = error_lines(refused);
  ASSERT_EQ(lines.size(), 1u) << refused.err;
  // Every per-node blob of the job, none of which has a rule for another rank count.
  for (const auto* blob : {"values", "cursor", "total", "exhausted"}) {
    EXPECT_NE(lines[0].find(blob), std::string::npos) << blob << ": " << lines[0];
  }
  EXPECT_FALSE(std::filesystem::exists(cwd / "S"));
  EXPECT_EQ(list_directory(cwd / "D"), files_before);
}

}  // namespace
}  // namespace epochrun::testing
