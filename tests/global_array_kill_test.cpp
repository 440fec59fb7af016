// Kill-anywhere recovery of a job whose state is a global array, resumed on another rank count.
// Seeded trials run heat_diffusion (its field a global array over a 2-D process grid) on 3
// ranks and kill one rank or the whole job with SIGKILL inside an epoch, inside a save (before
// the write of the array, in the data step, before the rename) or after a commit, reached
// exactly through EPOCHRUN_FAULT, synchronous and asynchronous saves, the array written by
// each rank directly and by collective MPI-IO (--array-io). After every trial:
//   - the job ended within a bounded time;
//   - every committed epoch's field is the uninterrupted 1-rank run's field of that epoch;
//   - `--resume-from-epoch latest` on 2 ranks, then on 4, ends with the 1-rank run's field, bit
//     for bit, and no temporary file is left.
// One more trial per path fails one rank at the write of the array with an error instead of a
// kill: the save fails on every rank, the job goes on, and every committed checkpoint stays as
// it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kLastEpoch = 5;
constexpr double kJobEndsWithinSeconds = 90;
constexpr int kTrials = 10;
constexpr std::uint64_t kSeed = 20261126;

// `array_io`: --array-io, how the field reaches the file (3 ranks split it in row bands, which
// the direct path writes; 4 ranks in a 2 x 2 grid, which always takes collective MPI-IO).
std::vector<std::string> heat_command(int ranks, const std::string& resume, bool asynchronous,
                                      std::int64_t last_epoch = kLastEpoch,
                                      const std::string& array_io = "auto") {
  std::vector<std::string> args = {"run",
                                   "--job",
                                   "heat_diffusion",
                                   "--checkpoint-dir",
                                   "D",
                                   "--heat_diffusion.rows",
                                   "96",
                                   "--heat_diffusion.columns",
                                   "80",
                                   "--heat_diffusion.sweeps_per_epoch",
                                   "3",
                                   "--heat_diffusion.max_epochs",
                                   "100",
                                   "--heat_diffusion.tolerance",
                                   "0",
                                   "--heat_diffusion.output_file",
                                   "",
                                   "--num-epochs",
                                   std::to_string(last_epoch),
                                   "--preempt-signals",
                                   "none",
                                   "--array-io",
                                   array_io};
  if (asynchronous) {
    args.push_back("--async-checkpoint");
  }
  if (!resume.empty()) {
    args.insert(args.end(), {"--resume-from-epoch", resume});
  }
  return epochrun_on_ranks(ranks, args);
}

// The field of a committed epoch, read whole (every writer block verified); empty when it cannot
// be read, which the caller's comparison then reports.
Blob field_of(const std::filesystem::path& directory, std::int64_t epoch) {
  try {
    return CheckpointReader(CheckpointDirectory(directory).file_for(epoch)).read_array("field");
  } catch (const std::exception& error) {
    ADD_FAILURE() << "epoch " << epoch << ": " << error.what();
    return {};
  }
}

class GlobalArrayKill : public ::testing::Test {
 protected:
  // The uninterrupted run on one rank: every epoch's field.
  static void SetUpTestSuite() {
    reference_dir_ = new ScratchDir();
    const auto result =
        run_within(heat_command(1, "", false), reference_dir_->path(), kJobEndsWithinSeconds);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    reference_ = new std::vector<Blob>();
    for (std::int64_t epoch = 0; epoch <= kLastEpoch; ++epoch) {
      reference_->push_back(field_of(reference_dir_->path() / "D", epoch));
    }
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete reference_dir_;
  }

  // Every committed epoch of `directory` holds the reference field of that epoch.
  static void expect_committed_fields_intact(const std::filesystem::path& directory) {
    for (auto epoch : CheckpointDirectory(directory).committed_epochs()) {
      EXPECT_TRUE(field_of(directory, epoch) == reference_->at(static_cast<std::size_t>(epoch)))
          << "committed epoch " << epoch << " differs from the uninterrupted run";
    }
  }

  // Resumes the run in `cwd` on 2 ranks for one more epoch, then on 4 to the end: the final
  // field is the reference's.
  static void expect_resumes_on_other_rank_counts(const std::filesystem::path& cwd,
                                                  bool asynchronous) {
    const auto directory = cwd / "D";
    const auto committed = CheckpointDirectory(directory).committed_epochs();
    const std::int64_t newest = committed.empty() ? -1 : committed.back();
    const auto on_two =
        run_within(heat_command(2, "latest", asynchronous,
                                std::clamp<std::int64_t>(newest + 1, 1, kLastEpoch)),
                   cwd, kJobEndsWithinSeconds);
    EXPECT_EQ(on_two.exit_code, 0) << on_two.err;
    const auto on_four =
        run_within(heat_command(4, "latest", asynchronous), cwd, kJobEndsWithinSeconds);
    EXPECT_EQ(on_four.exit_code, 0) << on_four.err;
    EXPECT_TRUE(field_of(directory, kLastEpoch) == reference_->back())
        << "the field after resumes on 2 and 4 ranks differs from the uninterrupted run";
    for (const auto& name : list_directory(directory)) {
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    }
  }

  static inline ScratchDir* reference_dir_ = nullptr;
  static inline std::vector<Blob>* reference_ = nullptr;
};

TEST_F(GlobalArrayKill, KilledAnywhereThenResumedOnTwoAndFourRanksEndsBitIdentical) {
  const char* phases[] = {"save-write-array",   "save-create",       "save-write",
                          "save-before-rename", "save-after-rename", "epoch"};
  std::mt19937_64 random(kSeed);
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string phase = phases[trial % std::size(phases)];
    const bool asynchronous = trial % 2 == 1 && phase != "save-after-rename";
    const std::int64_t epoch = phase == "epoch" ? pick(1, kLastEpoch) : pick(0, kLastEpoch - 1);
    const std::int64_t rank = pick(-1, 2);
    const std::string array_io = trial % 4 < 2 ? "direct" : "mpiio";
    const std::string fault = phase + "@" + std::to_string(epoch) +
                              (rank >= 0 ? ":" + std::to_string(rank) : "") + ":KILL";
    SCOPED_TRACE((asynchronous ? "async, " : "") + std::string("--array-io ") + array_io +
                 ", EPOCHRUN_FAULT=" + fault);
    ScratchDir cwd;
    ChildProcess job(heat_command(3, "", asynchronous, kLastEpoch, array_io), cwd.path(),
                     with_fault(fault));
    const auto ended = job.wait(kJobEndsWithinSeconds);
    ASSERT_TRUE(ended.has_value())
        << "the job did not end within " << kJobEndsWithinSeconds << " s";
    EXPECT_NE(ended->exit_code, 0) << "the injected fault did not fire";
    expect_committed_fields_intact(cwd / "D");
    expect_resumes_on_other_rank_counts(cwd.path(), asynchronous);
    if (HasFailure()) {
      return;
    }
  }
}

// One rank fails at the write of the field (an error, as a failing disk gives), on each path:
// the save of that epoch fails on every rank, the job goes on, nothing committed changes, and a
// resume on 2 ranks ends bit-identical.
TEST_F(GlobalArrayKill, AFailureAtTheArraysWriteFailsThatSaveOnlyAndTheJobGoesOn) {
  for (const std::string array_io : {"direct", "mpiio"}) {
    SCOPED_TRACE("--array-io " + array_io);
    ScratchDir cwd;
    const auto result = run_within(heat_command(3, "", false, kLastEpoch, array_io), cwd.path(),
                                   kJobEndsWithinSeconds, with_fault("save-write-array@2:1:THROW"));
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("checkpoint for epoch 2 failed"), std::string::npos) << result.err;
    EXPECT_EQ(CheckpointDirectory(cwd / "D").committed_epochs(),
              (std::vector<std::int64_t>{0, 1, 3, 4, 5}));
    expect_committed_fields_intact(cwd / "D");
    expect_resumes_on_other_rank_counts(cwd.path(), false);
  }
}

}  // namespace
}  // namespace epochrun::testing
