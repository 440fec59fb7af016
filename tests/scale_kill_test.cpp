// A run of 48 ranks -- oversubscribed, as many ranks share few cores -- killed inside a save
// resumes bit-identical to an uninterrupted one, no committed epoch lost: the save's agreements
// (collective reductions) and every rank's share of the file hold at a rank count where one
// message per rank to rank 0, or a rank that spins while the others want its core, would show.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr int kRanks = 48;
constexpr std::int64_t kEpochs = 4;
// 48 ranks start in seconds each; the whole run is well under a minute on two cores.
constexpr double kRunSeconds = 300;

std::vector<std::string> heat_command(const std::string& resume) {
  std::vector<std::string> args = {"run",
                                   "--job",
                                   "heat_diffusion",
                                   "--log-level",
                                   "warn",
                                   "--checkpoint-dir",
                                   "D",
                                   "--preempt-signals",
                                   "none",
                                   "--heat_diffusion.rows",
                                   "96",
                                   "--heat_diffusion.columns",
                                   "64",
                                   "--heat_diffusion.sweeps_per_epoch",
                                   "2",
                                   "--heat_diffusion.tolerance",
                                   "0",
                                   "--heat_diffusion.max_epochs",
                                   std::to_string(kEpochs)};
  if (!resume.empty()) {
    args.insert(args.end(), {"--resume-from-epoch", resume});
  }
  return epochrun_on_ranks(kRanks, args);
}

// The global arrays, the replicated blobs and every node's blobs of a checkpoint file.
struct Saved {
  std::map<std::string, Blob> arrays;  // and replicated blobs
  CheckpointContents nodes;
};

Saved saved_in(const std::filesystem::path& file) {
  CheckpointReader reader(file);
  Saved saved;
  for (const auto& array : reader.header().arrays) {
    saved.arrays[array.name] = reader.read_array(array.name);
  }
  for (const auto& replicated : reader.header().replicated) {
    saved.arrays[replicated.name] = reader.read_replicated(replicated.name);
  }
  saved.nodes = read_checkpoint_contents(file);
  return saved;
}

TEST(ScaleKill, FortyEightRanksKilledInsideASaveResumeBitIdentical) {
  ScratchDir reference;
  const auto uninterrupted = run_within(heat_command(""), reference.path(), kRunSeconds);
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  const CheckpointDirectory reference_directory(reference / "D");
  ASSERT_EQ(reference_directory.committed_epochs().size(), std::size_t{kEpochs + 1});

  // Rank 29 dies with its part of epoch 2 written, before the file is complete.
  ScratchDir cwd;
  const auto killed =
      run_within(heat_command(""), cwd.path(), kRunSeconds, with_fault("save-write@2:29:KILL"));
  EXPECT_NE(killed.exit_code, 0) << "the run went on without rank 29";
  const CheckpointDirectory directory(cwd / "D");
  EXPECT_EQ(directory.committed_epochs(), (std::vector<std::int64_t>{0, 1}));

  const auto resumed = run_within(heat_command("latest"), cwd.path(), kRunSeconds);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  ASSERT_EQ(directory.committed_epochs().size(), std::size_t{kEpochs + 1});
  for (std::int64_t epoch = 0; epoch <= kEpochs; ++epoch) {
    const auto expected = saved_in(reference_directory.file_for(epoch));
    const auto got = saved_in(directory.file_for(epoch));
    EXPECT_EQ(got.arrays, expected.arrays) << "epoch " << epoch;
    EXPECT_EQ(got.nodes, expected.nodes) << "epoch " << epoch;
  }
}

}  // namespace
}  // namespace epochrun::testing
