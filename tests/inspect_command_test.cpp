// `epochrun inspect` as a user runs it, on the checkpoints of real runs: the summary, the blob
// tree, values (compared with what numpy prints of h5py's reading), .npy export (loaded back
// with numpy), the differences between two epochs, verification, and every bad input as one
// line with its exit code.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launch.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

namespace fs = std::filesystem;

// Waits at most `seconds` for `argv` in `cwd`; a hang fails the test.
ProcessResult bounded(const std::vector<std::string>& argv, const fs::path& cwd,
                      double seconds = 120) {
  return run_within(argv, cwd, seconds);
}

ProcessResult inspect(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv = {EPOCHRUN_BINARY, "inspect"};
  argv.insert(argv.end(), args.begin(), args.end());
  return bounded(argv, cwd);
}

ProcessResult python(const std::string& script, const fs::path& cwd) {
  return bounded({SYSTEM_PYTHON, "-c", script}, cwd);
}

// Python that reads `file` with docs/load_checkpoint.py (h5py) into `state`, a dict of numpy
// arrays by "node/blob": whatever the format version stores where, these are the values.
std::string load_checkpoint(const fs::path& file) {
  return "import sys\nsys.path.insert(0, '" EPOCHRUN_SOURCE_DIR
         "/docs')\n"
         "from load_checkpoint import load\n"
         "state = load('" +
         file.string() + "')\n";
}

// Two real runs shared by every test (read-only): heat_diffusion (a 2-D field of 1 MiB per
// rank, 3 epochs) and sgd_regression (4 epochs, opaque optimizer state), on 3 ranks.
class Inspect : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = new ScratchDir;
    auto heat = bounded(
        epochrun_on_ranks(
            3, {"run", "--job", "heat_diffusion", "--checkpoint-dir", "H", "--log-level", "warn",
                "--heat_diffusion.mib_per_rank", "1", "--heat_diffusion.columns", "256",
                "--heat_diffusion.max_epochs", "3", "--heat_diffusion.sweeps_per_epoch", "2",
                "--heat_diffusion.output_file", ""}),
        runs_->path(), 300);
    ASSERT_EQ(heat.exit_code, 0) << heat.err;
    auto sgd_options = small_sgd_regression_options(4);
    sgd_options.insert(sgd_options.begin(), {"run", "--checkpoint-dir", "S"});
    auto sgd = bounded(epochrun_on_ranks(3, sgd_options), runs_->path(), 300);
    ASSERT_EQ(sgd.exit_code, 0) << sgd.err;
  }
  static void TearDownTestSuite() {
    delete runs_;
    runs_ = nullptr;
  }
  static fs::path heat() { return runs_->path() / "H"; }
  static fs::path sgd() { return runs_->path() / "S"; }

  ScratchDir cwd_;
  static ScratchDir* runs_;
};
ScratchDir* Inspect::runs_ = nullptr;

TEST_F(Inspect, SummaryListsEveryEpochWithItsCountsAndTheBlobTreeComesWithBlobs) {
  auto summary = inspect({heat().string()}, cwd_.path());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_NE(summary.out.find("committed checkpoints in " + heat().string() + ": 4\n"),
            std::string::npos)
      << summary.out;
  for (int epoch = 0; epoch <= 3; ++epoch) {
    EXPECT_NE(summary.out.find("epoch " + std::to_string(epoch) + "  epoch-00000" +
                               std::to_string(epoch) + ".h5  "),
              std::string::npos)
        << summary.out;
  }
  // Per node 4 blobs, and the epoch limiter's counter once (replicated): format version 3.
  EXPECT_NE(summary.out.find("job heat_diffusion  3 ranks  13 blobs  3145856 blob bytes  format 3 "
                             "(12 per-node, 1 replicated, 0 global arrays)"),
            std::string::npos)
      << summary.out;
  EXPECT_EQ(summary.out.find("field"), std::string::npos) << "no tree without --blobs";

  auto tree = inspect({heat().string(), "--blobs", "--epoch", "2"}, cwd_.path());
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_NE(tree.out.find("committed checkpoints in " + heat().string() + ": 1\n"),
            std::string::npos);
  EXPECT_NE(tree.out.find("  trainer_2/\n"), std::string::npos) << tree.out;
  EXPECT_NE(tree.out.find("    field          f64[512, 256]  1048576 bytes  xxh64 "),
            std::string::npos)
      << tree.out;
  EXPECT_NE(tree.out.find("  replicated/\n    epochs_remaining  i64[]  8 bytes  xxh64 "),
            std::string::npos)
      << tree.out;

  auto json = nlohmann::json::parse(inspect({heat().string(), "--json"}, cwd_.path()).out);
  ASSERT_EQ(json["checkpoints"].size(), 4u);
  const auto& last = json["checkpoints"][3];
  EXPECT_EQ(last["epoch"], 3);
  EXPECT_EQ(last["num_nodes"], 3);
  EXPECT_EQ(last["num_blobs"], 13);
  EXPECT_EQ(last["num_replicated"], 1);
  EXPECT_EQ(last["blob_bytes"], 3145856);
  EXPECT_FALSE(last.contains("nodes"));
  EXPECT_EQ(json["history"].size(), 1u);
}

TEST_F(Inspect, ASingleFileIsInspectedLikeADirectoryOfOne) {
  const auto file = sgd() / "epoch-000002.h5";
  auto listing = inspect({file.string(), "--json", "--blobs"}, cwd_.path());
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  const auto json = nlohmann::json::parse(listing.out);
  EXPECT_EQ(json["file"], file.string());
  ASSERT_EQ(json["checkpoints"].size(), 1u);
  EXPECT_EQ(json["checkpoints"][0]["epoch"], 2);
  EXPECT_EQ(json["checkpoints"][0]["nodes"]["trainer_0"].size(), 5u);
  EXPECT_EQ(json["checkpoints"][0]["replicated"][0]["name"], "epochs_remaining");
  auto shown = inspect({file.string(), "--show", "trainer_0/data_cursor"}, cwd_.path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("(epoch 2, " + file.string() + ")"), std::string::npos) << shown.out;
}

// --show prints exactly what numpy prints of the values h5py reads: a 512 x 256 field
// (summarized), a scalar that is inf, an integer scalar.
TEST_F(Inspect, ShowPrintsWhatNumpyPrintsOfH5pysValues) {
  for (const auto& [blob, epoch] : std::vector<std::pair<std::string, std::string>>{
           {"trainer_1/field", "3"}, {"trainer_2/max_change", "0"}, {"trainer_0/sweeps", "2"}}) {
    auto shown = inspect({heat().string(), "--show", blob, "--epoch", epoch}, cwd_.path());
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    const auto values = shown.out.substr(shown.out.find('\n') + 1);
    auto numpy = python(load_checkpoint(heat() / ("epoch-00000" + epoch + ".h5")) +
                            "print(state['" + blob + "'])\n",
                        cwd_.path());
    ASSERT_EQ(numpy.exit_code, 0) << numpy.err;
    EXPECT_EQ(values, numpy.out) << blob;
  }
  auto full = inspect({heat().string(), "--show", "trainer_1/field", "--full"}, cwd_.path());
  EXPECT_EQ(full.out.find("..."), std::string::npos);
  EXPECT_GT(full.out.size(), 512u * 256u * 10u);
}

TEST_F(Inspect, ShowPrintsOpaqueBytesAsAHexDump) {
  auto shown = inspect({sgd().string(), "--show", "trainer_0/optimizer_state"}, cwd_.path());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("trainer_0/optimizer_state  bytes["), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("\n00000000  "), std::string::npos) << shown.out;
  auto json = nlohmann::json::parse(
      inspect({sgd().string(), "--show", "trainer_0/optimizer_state", "--json"}, cwd_.path()).out);
  EXPECT_EQ(json["dtype"], "bytes");
  EXPECT_EQ(json["epoch"], 4);
  // The dump's first line holds the first 16 bytes of the JSON's hex string.
  const auto hex = json["values"].get<std::string>();
  std::string spaced;
  for (std::size_t i = 0; i < 16; ++i) {
    spaced += hex.substr(2 * i, 2) + (i == 7 ? "  " : " ");
  }
  EXPECT_NE(shown.out.find("00000000  " + spaced), std::string::npos) << shown.out;
}

// Every blob exported as NODE/BLOB.npy; numpy loads each one, and its dtype, shape and values
// are the ones `--show --json --full` prints and the ones h5py reads.
TEST_F(Inspect, ExportWritesOneNpyPerBlobThatNumpyLoads) {
  for (const auto& run : {heat(), sgd()}) {
    const auto out = cwd_ / ("export-" + run.filename().string());
    auto exported =
        inspect({run.string(), "--export", out.string(), "--epoch", "2", "--json"}, cwd_.path());
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    const auto files = nlohmann::json::parse(exported.out)["files"];
    // Every node's per-node blobs and the replicated epoch counter once.
    ASSERT_EQ(files.size(), run == heat() ? 13u : 16u);
    for (const auto& file : files) {
      const auto blob = file["blob"].get<std::string>();
      auto shown = nlohmann::json::parse(
          inspect({run.string(), "--show", blob, "--epoch", "2", "--json", "--full"}, cwd_.path())
              .out);
      auto loaded = python(
          "import numpy, json\n"
          "a = numpy.load('" +
              (out / file["file"].get<std::string>()).string() +
              "', allow_pickle=False)\n"
              "print(json.dumps({'dtype': a.dtype.str, 'shape': list(a.shape),\n"
              "  'values': a.tobytes().hex() if a.dtype == numpy.uint8 else a.tolist()}))\n",
          cwd_.path());
      ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
      const auto npy = nlohmann::json::parse(loaded.out);
      EXPECT_EQ(npy["shape"], shown["shape"]) << blob;
      if (shown["dtype"] == "bytes" || shown["dtype"] == "u8") {
        EXPECT_EQ(npy["dtype"], "|u1") << blob;
        if (shown["dtype"] == "bytes") {
          EXPECT_EQ(npy["values"], shown["values"]) << blob;
        }
      } else {
        EXPECT_EQ(npy["values"], shown["values"]) << blob;
      }
    }
    // Every file against the checkpoint as docs/load_checkpoint.py reads it with h5py.
    auto same = python(load_checkpoint(run / "epoch-000002.h5") +
                           "import numpy, os\n"
                           "for blob, b in state.items():\n"
                           "    a = numpy.load(os.path.join('" +
                           out.string() +
                           "', blob + '.npy'))\n"
                           "    assert a.dtype == b.dtype and a.shape == b.shape and "
                           "(a == b).all(), blob\n"
                           "print(len(state))\n",
                       cwd_.path());
    EXPECT_EQ(same.exit_code, 0) << same.err;
    EXPECT_EQ(same.out, std::to_string(files.size()) + "\n");
  }
}

// A file of format version 1 (written by the version-1 code, kept in tests/data) is read the
// same way: inspect goes through the reader that loads every version.
TEST_F(Inspect, AVersion1FileIsInspectedVerifiedAndExportedAsWell) {
  const auto file =
      std::string(EPOCHRUN_SOURCE_DIR) + "/tests/data/v1_sgd_regression_3_ranks_epoch_4.h5";
  auto verified = inspect({file, "--verify"}, cwd_.path());
  EXPECT_EQ(verified.exit_code, 0) << verified.out;
  EXPECT_NE(verified.out.find("18 blobs  912 blob bytes  format 1  OK\n"), std::string::npos)
      << verified.out;
  auto exported = inspect({file, "--export", "E"}, cwd_.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto same = python(load_checkpoint(file) +
                         "import numpy\n"
                         "a = numpy.load('E/trainer_2/optimizer_state.npy')\n"
                         "b = state['trainer_2/optimizer_state']\n"
                         "assert a.dtype == numpy.uint8 and (a == b).all()\n",
                     cwd_.path());
  EXPECT_EQ(same.exit_code, 0) << same.err;
}

TEST_F(Inspect, DiffListsWhatChangedBetweenTwoEpochs) {
  auto diff = inspect({sgd().string(), "--diff", "1", "latest", "--json"}, cwd_.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  const auto json = nlohmann::json::parse(diff.out);
  EXPECT_EQ(json["from_epoch"], 1);
  EXPECT_EQ(json["to_epoch"], 4);
  std::vector<std::string> changed;
  for (const auto& blob : json["changed"]) {
    changed.push_back(blob["blob"].get<std::string>());
  }
  // Training moves the weights and the optimizer state of every node and the (replicated) epoch
  // counter (the data cursor comes back to where it was: 32 batches an epoch cover the samples
  // once).
  for (const std::string node : {"trainer_0", "trainer_1", "trainer_2"}) {
    for (const std::string blob : {"weights", "optimizer_state"}) {
      EXPECT_NE(std::find(changed.begin(), changed.end(), node + "/" + blob), changed.end())
          << node << "/" << blob << " in " << diff.out;
    }
  }
  EXPECT_NE(std::find(changed.begin(), changed.end(), "replicated/epochs_remaining"), changed.end())
      << diff.out;
  EXPECT_EQ(json["changed"].size() + json["unchanged"].get<std::size_t>(), 16u);
  EXPECT_TRUE(json["added"].empty());
  EXPECT_TRUE(json["removed"].empty());

  auto text = inspect({sgd().string(), "--diff", "1", "4"}, cwd_.path());
  EXPECT_NE(text.out.find("epoch 1 -> epoch 4: " + std::to_string(changed.size()) + " changed"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("changed  trainer_1/weights  f64[4]  xxh64 "), std::string::npos)
      << text.out;

  auto same = nlohmann::json::parse(
      inspect({sgd().string(), "--diff", "3", "3", "--json"}, cwd_.path()).out);
  EXPECT_TRUE(same["changed"].empty());
  EXPECT_EQ(same["unchanged"], 16);
}

// A run resumed with another learning rate: the diff names the option and both values.
TEST_F(Inspect, DiffShowsConfigurationChanges) {
  auto options = small_sgd_regression_options(6);
  options.insert(options.begin(), {"run", "--checkpoint-dir", "S"});
  auto first = options;
  first.insert(first.end(), {"--num-epochs", "2"});
  ASSERT_EQ(bounded(epochrun_on_ranks(3, first), cwd_.path(), 300).exit_code, 0);
  options.insert(options.end(), {"--resume-from-epoch", "latest", "--num-epochs", "3",
                                 "--sgd_regression.learning_rate", "0.001"});
  ASSERT_EQ(bounded(epochrun_on_ranks(3, options), cwd_.path(), 300).exit_code, 0);
  auto diff = inspect({"S", "--diff", "2", "3"}, cwd_.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_NE(diff.out.find("config   sgd_regression.learning_rate: "), std::string::npos)
      << diff.out;
  EXPECT_NE(diff.out.find("sgd_regression.learning_rate: 0.02 -> 0.001\n"), std::string::npos)
      << diff.out;
}

// --verify says, per file, what it checked and what it found; one damaged blob makes exit 3 and
// is named, and the other files still say they are intact.
TEST_F(Inspect, VerifySaysWhatItCheckedAndWhatItFoundPerFile) {
  ASSERT_EQ(bounded(epochrun_on_ranks(3, {"run", "--job", "sum_pipeline", "--checkpoint-dir", "D",
                                          "--log-level", "warn"}),
                    cwd_.path(), 300)
                .exit_code,
            0);
  auto intact = inspect({"D", "--verify"}, cwd_.path());
  EXPECT_EQ(intact.exit_code, 0) << intact.out;
  EXPECT_NE(intact.out.find("epoch 2  epoch-000002.h5  "), std::string::npos) << intact.out;
  EXPECT_NE(intact.out.find("  checked: integrity header (its checksum, the file size, the "
                            "metadata hash), every dataset's layout; 12 blobs' xxh64 (300 "
                            "bytes read)\n  found: nothing wrong\n"),
            std::string::npos)
      << intact.out;

  // trainer_1's reader values (0..9) in epoch 2; and epoch 3 cut short.
  ASSERT_TRUE(flip_bit_in_pattern(cwd_ / "D/epoch-000002.h5", int64_bytes(0, 10), 1, 3 * 8));
  fs::resize_file(cwd_ / "D/epoch-000003.h5", 4000);
  auto damaged = inspect({"D", "--verify"}, cwd_.path());
  EXPECT_EQ(damaged.exit_code, 3) << damaged.out;
  EXPECT_NE(damaged.out.find("found: trainer_1/values: "), std::string::npos) << damaged.out;
  EXPECT_NE(damaged.out.find("checksum mismatch"), std::string::npos) << damaged.out;
  EXPECT_NE(damaged.out.find("epoch 3  epoch-000003.h5  4000 bytes  CORRUPT: "), std::string::npos)
      << damaged.out;
  EXPECT_NE(damaged.out.find("(no blob read)"), std::string::npos) << damaged.out;
  auto json = nlohmann::json::parse(inspect({"D", "--verify", "--json"}, cwd_.path()).out);
  std::vector<bool> valid;
  for (const auto& entry : json["checkpoints"]) {
    valid.push_back(entry["valid"].get<bool>());
  }
  EXPECT_EQ(valid, (std::vector<bool>{true, true, false, false, true}));
  EXPECT_EQ(json["checkpoints"][2]["verified"]["problems"][0]["blob"], "trainer_1/values");
  EXPECT_EQ(json["checkpoints"][2]["verified"]["blobs_intact"], 11);

  // One intact file on its own verifies; an export of the damaged epoch fails and leaves nothing.
  EXPECT_EQ(inspect({"D/epoch-000004.h5", "--verify"}, cwd_.path()).exit_code, 0);
  auto exported = inspect({"D", "--export", "E", "--epoch", "2"}, cwd_.path());
  EXPECT_EQ(exported.exit_code, 3) << exported.err;
  EXPECT_EQ(error_lines(exported).size(), 1u) << exported.err;
  EXPECT_FALSE(fs::exists(cwd_ / "E"));
}

TEST_F(Inspect, BadInputIsOneLineWithItsExitCodeAndTouchesNothing) {
  fs::create_directory(cwd_ / "empty");
  fs::create_directory(cwd_ / "busy");
  write_file(cwd_ / "busy" / "keep", "mine");
  write_file(cwd_ / "plain", "not a checkpoint");
  const auto dir = sgd().string();
  const auto file = (sgd() / "epoch-000001.h5").string();
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  };
  for (const auto& [args, exit_code, says] : std::vector<Case>{
           {{}, 2, "needs a checkpoint directory or file"},
           {{"no_such"}, 2, "'no_such' is not a directory or a checkpoint file"},
           {{dir, "--epoch", "x"}, 2, "invalid epoch 'x'"},
           {{dir, "--epoch", "99"}, 3, "no committed checkpoint for epoch 99"},
           {{"empty", "--show", "trainer_0/weights"}, 3, "no committed checkpoint in empty"},
           {{dir, "--show", "weights"}, 2, "--show takes NODE/BLOB"},
           {{dir, "--show", "trainer_0/nope"}, 3, "has no blob 'nope'"},
           {{dir, "--show", "trainer_9/weights"}, 3, "trainer_9"},
           {{dir, "--full"}, 2, "--full goes with --show"},
           {{dir, "--diff", "1"}, 2, "--diff takes two epochs"},
           {{dir, "--diff", "1", "2", "--epoch", "1"}, 2, "leave out --epoch"},
           {{dir, "--diff", "1", "77"}, 3, "no committed checkpoint for epoch 77"},
           {{dir, "--show", "a/b", "--export", "E"}, 2, "give one of them"},
           {{dir, "--diff", "1", "2", "--verify"}, 2, "do not go with"},
           {{file, "--epoch", "1"}, 2, "is one checkpoint file"},
           {{file, "--diff", "1", "2"}, 2, "is one file"},
           {{dir, "--export", "busy"}, 2, "--export busy exists and is not an empty directory"},
           {{dir, "--export", "plain"}, 2, "--export plain exists"},
           {{"plain"}, 3, "CORRUPT"},
           {{dir, "--frobnicate"}, 2, "frobnicate"},
       }) {
    auto result = inspect(args, cwd_.path());
    const std::string what = args.empty() ? "(none)" : args.back();
    EXPECT_EQ(result.exit_code, exit_code) << what << "\n" << result.err;
    const auto lines = error_lines(result);
    if (says == "CORRUPT") {  // a damaged file is a listing's finding, not an error line
      EXPECT_NE(result.out.find("CORRUPT: "), std::string::npos) << result.out;
      continue;
    }
    ASSERT_EQ(lines.size(), 1u) << what << "\n" << result.err;
    EXPECT_NE(lines[0].find(says), std::string::npos) << lines[0];
  }
  EXPECT_EQ(list_directory(cwd_.path()), (std::vector<std::string>{"busy", "empty", "plain"}));
  EXPECT_EQ(read_file(cwd_ / "busy" / "keep"), "mine");
  EXPECT_TRUE(list_directory(cwd_ / "empty").empty());
}

}  // namespace
}  // namespace epochrun::testing
