// --local-redundancy across real hosts: five hosts of tests/clusters/multihost (each its own /local
// tmpfs), MPI over TCP between them, four ranks, one a host. The end-to-end trial of a lost host:
// heat_diffusion (partner, none) and sgd_regression (xor:4) with --local-dir on /local and
// --flush-every 5, host2's rank killed in epoch 8 (epochs 6 and 7 node-local only) and host2's
// /local wiped; the restart on host1, host3, host4 and the fresh host5 resumes from node-local
// epoch 7, host2's part rebuilt, and ends bit-identical to an uninterrupted run; with none it falls
// back to the flushed epoch 5 and says what that costs. With a small driver that writes and
// protects parts (local_redundancy_driver): two wiped hosts of an XOR set are reported lost on
// every rank, and a damaged byte in a partner copy or a parity block is found and never used. About
// 75 s, a third of it mpirun's start-ups across the hosts.
#define EPOCHRUN_MULTIHOST_HOSTS 5

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <sstream>
#include <tuple>

#include "epochrun/blob_file.hpp"
#include "multihost_harness.hpp"

namespace epochrun::testing {
namespace {

const std::string kDriver = LOCAL_REDUNDANCY_DRIVER;
const std::string kSaveHosts = "host1,host2,host3,host4";
// The restart: host2 is gone, host5 takes its rank.
const std::string kRestartHosts = "host1,host5,host3,host4";

class MultihostRedundancy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Harness::unavailable_.empty()) {
      GTEST_SKIP() << Harness::unavailable_;
    }
    ASSERT_TRUE(Harness::up_) << "start-hosts.sh failed";
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = "/local/epochrun-redundancy-test/" + std::string(test->name());
  }
  void TearDown() override {
    for (const auto& host : kHosts) {
      on_host(host, "rm -rf /local/epochrun-redundancy-test");
    }
  }

  // The driver on 4 ranks of `hosts`; its output.
  std::string driver(const std::string& hosts, const std::vector<std::string>& args) {
    const auto result = run_within(program_on_hosts(kDriver, hosts, 4, "/tmp", args), "/",
                                   kJobEndsWithinSeconds, launcher_environment());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    return result.out;
  }
  std::string save(const std::string& scheme) {
    return driver(kSaveHosts, {"save", dir_, "17", scheme, "900", "5"});
  }
  std::string recover(const std::string& hosts = kRestartHosts) {
    return driver(hosts, {"recover", dir_, "17", "900", "5"});
  }
  void wipe(const std::string& host) {
    EXPECT_EQ(on_host(host, "rm -rf /local/epochrun-redundancy-test").exit_code, 0);
  }
  // One byte of `file` on `host` flipped.
  void flip_byte(const std::string& host, const std::string& file) {
    const auto flipped =
        on_host(host,
                "python3 -c \"import sys; f = open(sys.argv[1], 'r+b'); f.seek(-100, 2); b = "
                "f.read(1); f.seek(-100, 2); f.write(bytes([b[0] ^ 16]))\" " +
                    dir_ + "/" + file);
    EXPECT_EQ(flipped.exit_code, 0) << flipped.err;
  }
  std::string dir_;
};

// One lost host of the set is rebuilt by the trials below (MultihostLevels); two are not.
TEST_F(MultihostRedundancy, TwoLostHostsOfAnXorSetAreReportedLostOnEveryRank) {
  save("xor:4");
  wipe("host2");
  wipe("host3");
  const auto lost = recover(kSaveHosts);
  EXPECT_NE(lost.find("lost: 1 2\n"), std::string::npos) << lost;
  EXPECT_NE(lost.find("host: host3: 1 part lost"), std::string::npos) << lost;
  // The parts that were not lost are there, as they were saved.
  EXPECT_NE(lost.find("rank 0 on host1: copy xxh64"), std::string::npos) << lost;
  EXPECT_NE(lost.find("rank 3 on host4: copy xxh64"), std::string::npos) << lost;
}

TEST_F(MultihostRedundancy, ADamagedByteInAPartnerCopyOrParityBlockIsNeverUsed) {
  for (const auto& [scheme, host, file] :
       {std::tuple("partner", "host3", "epoch-000017.rank-1.partner"),
        std::tuple("xor:4", "host4", "epoch-000017.rank-3.xor")}) {
    save(scheme);
    flip_byte(host, file);
    wipe("host2");
    wipe("host5");
    const auto recovered = recover();
    EXPECT_NE(recovered.find("lost: 1\n"), std::string::npos) << recovered;
    EXPECT_NE(recovered.find(std::string("damaged: ") + host + ": " + file), std::string::npos)
        << recovered;
    EXPECT_EQ(recovered.find("rank 1 on host5"), std::string::npos) << recovered;
  }
}

// A job of the trial: its options (without --log-level) and the output file that says how its
// run ended.
struct TrialJob {
  std::string name;
  std::vector<std::string> options;
  std::string output_file;
};

const TrialJob kHeat{
    "heat_diffusion",
    {"--job", "heat_diffusion", "--heat_diffusion.rows", "64", "--heat_diffusion.columns", "128",
     "--heat_diffusion.max_epochs", "12", "--heat_diffusion.tolerance", "0",
     "--heat_diffusion.output_file", "heat_summary.json"},
    "heat_summary.json"};
const TrialJob kSgd{"sgd_regression",
                    [] {
                      auto options = small_sgd_regression_options(12);
                      const auto level = std::find(options.begin(), options.end(), "--log-level");
                      options.erase(level, level + 2);
                      return options;
                    }(),
                    "model.h5"};

std::vector<std::string> trial_args(const TrialJob& job, const std::string& local_dir,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--checkpoint-dir", "ck", "--log-level", "info"};
  args.insert(args.end(), job.options.begin(), job.options.end());
  if (!local_dir.empty()) {
    args.insert(args.end(), {"--local-dir", local_dir, "--flush-every", "5"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A run's end as its output file says: an HDF5 file's datasets (its bytes hold times), another
// file's bytes.
std::map<std::string, Blob> ending_of(const std::filesystem::path& file) {
  if (file.extension() == ".h5") {
    return read_blob_file(file);
  }
  const auto text = read_file(file);
  return {{file.filename().string(),
           Blob::bytes(std::as_bytes(std::span<const char>(text.data(), text.size())))}};
}

class MultihostLevels
    : public MultihostRedundancy,
      public ::testing::WithParamInterface<std::tuple<const TrialJob*, const char*>> {
 protected:
  // The uninterrupted run's end, on this machine alone (4 ranks, no node-local level).
  static std::map<std::string, Blob> uninterrupted(const TrialJob& job) {
    ScratchDir directory;
    const auto result = run_within(epochrun_on_ranks(4, trial_args(job, "", {})), directory.path(),
                                   kJobEndsWithinSeconds);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return ending_of(directory / job.output_file);
  }
  ProcessResult job(const std::string& hosts, const std::vector<std::string>& extra,
                    const std::string& fault = "") {
    return run_within(
        program_on_hosts(EPOCHRUN_BINARY, hosts, 4, shared_,
                         trial_args(*std::get<0>(GetParam()), dir_, extra), !fault.empty()),
        "/", kJobEndsWithinSeconds, launcher_environment(fault));
  }
  // The run's output file on the volume, copied here by host1 (/tmp is every host's).
  std::map<std::string, Blob> ending() {
    const auto& output = std::get<0>(GetParam())->output_file;
    const auto copied =
        on_host("host1", "cp '" + shared_ + "/" + output + "' '" + local_.path().string() + "/'");
    EXPECT_EQ(copied.exit_code, 0) << copied.err;
    return ending_of(local_ / output);
  }
  void SetUp() override {
    MultihostRedundancy::SetUp();
    // Without the harness the base skipped: a skip does not return from this function.
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    shared_ = "/shared/epochrun-redundancy-test/run";
    ASSERT_EQ(on_host("host1", "rm -rf '" + shared_ + "' && mkdir -p '" + shared_ + "'").exit_code,
              0);
  }
  void TearDown() override {
    // Whatever the killed run left on the hosts (never by name: the machine's other epochrun
    // processes are not this test's).
    for (const auto& host : kHosts) {
      for (const int pid : processes_on_host(host, EPOCHRUN_BINARY)) {
        ::kill(pid, SIGKILL);
      }
    }
    MultihostRedundancy::TearDown();
    on_host("host1", "rm -rf /shared/epochrun-redundancy-test");
  }
  std::string shared_;
  ScratchDir local_;
};

TEST_P(MultihostLevels, ALostHostBetweenTwoFlushesIsRebuiltOnAFreshOneBitIdentical) {
  const auto& [trial, redundancy_name] = GetParam();
  const std::string redundancy = redundancy_name;
  const auto expected = uninterrupted(*trial);
  ASSERT_FALSE(expected.empty());
  const auto killed = job(kSaveHosts, {"--local-redundancy", redundancy}, "epoch@8:1:KILL");
  ASSERT_NE(killed.exit_code, 0) << killed.out << killed.err;
  wipe("host2");
  const auto resumed = job(kRestartHosts, {"--local-redundancy", redundancy, "--resume-from-epoch",
                                           "latest", "--summary-json", "s.json"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  const auto all = resumed.out + resumed.err;
  const auto summary = on_host("host1", "cat '" + shared_ + "/s.json'").out;
  if (redundancy == "none") {
    EXPECT_NE(all.find("resuming from flushed epoch 5, 2 epochs lost"), std::string::npos) << all;
  } else {
    EXPECT_NE(all.find("resumed job " + trial->name + " from node-local epoch 7"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find(redundancy == "partner"
                           ? "host2: 1 part from the partner copy on host3"
                           : "host2: 1 part rebuilt from XOR parity on host1, host3, host4"),
              std::string::npos)
        << all;
    EXPECT_NE(summary.find("\"resumed_parts\""), std::string::npos) << summary;
  }
  EXPECT_TRUE(ending() == expected)
      << trial->output_file << " differs from the uninterrupted run's";
}

// Both jobs and both schemes in three runs: the added wall time stays small.
INSTANTIATE_TEST_SUITE_P(EachRedundancy, MultihostLevels,
                         ::testing::Values(std::tuple(&kHeat, "partner"),
                                           std::tuple(&kSgd, "xor:4"), std::tuple(&kHeat, "none")),
                         [](const auto& instance) {
                           const auto& job = std::get<0>(instance.param)->name;
                           return job.substr(0, job.find('_')) + "_" +
                                  std::string(std::get<1>(instance.param)).substr(0, 3);
                         });

}  // namespace
}  // namespace epochrun::testing
