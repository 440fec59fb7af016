// Format version 2 end to end on 3 ranks: small blobs packed into a few datasets and loaded
// bit-identical, version 1 files still loading, and every Python reader the documentation shows
// (docs/FORMAT.md's snippets, docs/load_checkpoint.py) reading a packed checkpoint with Debian's
// h5py.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <nlohmann/json.hpp>

#include "checkpoint_directory_admin.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

std::vector<std::string> node_names(const Communicator& comm) {
  std::vector<std::string> names;
  for (int rank = 0; rank < comm.size(); ++rank) {
    names.push_back("trainer_" + std::to_string(rank));
  }
  return names;
}

// Large blobs that keep their own dataset, a scalar "loss" and `small` blobs of every dtype
// and a few shapes, all different on every rank.
Workspace mixed_workspace(const Communicator& comm, int small) {
  Workspace workspace;
  const auto seed = static_cast<double>(comm.rank() + 1);
  std::vector<double> weights(10000);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    weights[i] = seed * 1000 + static_cast<double>(i) / 7;
  }
  workspace.put("weights", Blob::of<double>({100, 100}, weights));
  std::vector<std::byte> state(70000);
  for (std::size_t i = 0; i < state.size(); ++i) {
    state[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(comm.rank())) & 0xff);
  }
  workspace.put("optimizer_state", Blob::bytes(state));
  workspace.put("loss", Blob::scalar<double>(0.25 * seed));
  for (int i = 0; i < small; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "p%04d", i);
    const auto n = static_cast<std::uint64_t>(i % 7);
    switch (i % 6) {
      case 0:
        workspace.put(name, Blob::of<float>({n}, std::vector<float>(n, static_cast<float>(i))));
        break;
      case 1:
        workspace.put(name, Blob::of<std::int32_t>({n, 2}, std::vector<std::int32_t>(2 * n, i)));
        break;
      case 2:
        workspace.put(name, Blob::scalar<std::int64_t>(i * 1000003LL + comm.rank()));
        break;
      case 3:
        workspace.put(name, Blob::of<std::uint8_t>({n}, std::vector<std::uint8_t>(n, 7)));
        break;
      case 4: {
        const std::string text =
            "blob " + std::to_string(i) + " of rank " + std::to_string(comm.rank());
        workspace.put(name, Blob::bytes(std::as_bytes(std::span(text))));
        break;
      }
      default:
        workspace.put(name, Blob::of<double>({1, n}, std::vector<double>(n, seed / (i + 1))));
    }
  }
  return workspace;
}

CheckpointHeader header_for(const Communicator& comm, std::int64_t epoch) {
  CheckpointHeader header;
  header.epoch = epoch;
  header.job = "format_test";
  header.node_names = node_names(comm);
  header.config_json = "{}";
  return header;
}

// The number of datasets in the file, counted by HDF5 (serially, on the calling rank).
std::size_t dataset_count(const std::filesystem::path& file) {
  hid_t h5file = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  std::size_t count = 0;
  H5Ovisit(
      h5file, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char*, const H5O_info_t* info, void* counter) -> herr_t {
        *static_cast<std::size_t*>(counter) += info->type == H5O_TYPE_DATASET ? 1 : 0;
        return 0;
      },
      &count);
  H5Fclose(h5file);
  return count;
}

TEST(FormatV2, ManySmallBlobsArePackedIntoAFewDatasetsAndLoadBitIdentical) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  const CheckpointDirectory checkpoints(directory.path());
  const auto saved = mixed_workspace(world, 1000);
  save_checkpoint_v2(checkpoints, world, header_for(world, 5), saved, saved.names());
  if (world.is_root()) {
    // Per node: weights, optimizer_state, the index, the pack and the checksum table.
    EXPECT_EQ(dataset_count(checkpoints.file_for(5)), 5u * static_cast<std::size_t>(world.size()));
  }
  Workspace loaded;
  const auto names = load_checkpoint(
      checkpoints, world, CheckpointExpectation{5, "format_test", node_names(world)}, loaded);
  EXPECT_EQ(names, saved.names());
  EXPECT_EQ(loaded.blobs(), saved.blobs());
  // One blob at a time, from one process, as inspect and partial loads read.
  CheckpointReader reader(checkpoints.file_for(5));
  const auto node = "trainer_" + std::to_string(world.rank());
  for (const auto& name : {"p0004", "p0999", "loss", "weights"}) {
    EXPECT_EQ(reader.read_blob(node, name), saved.get(name)) << name;
  }
  world.barrier();
}

TEST(FormatV2, AFlippedByteInAPackedBlobIsNamedWithItsNodeAndPack) {
  const auto world = Communicator::world();
  ScratchDir directory(world);
  const CheckpointDirectory checkpoints(directory.path());
  auto saved = mixed_workspace(world, 100);
  saved.put("marked",
            Blob::of<std::int64_t>(
                {4}, std::vector<std::int64_t>{77, 0x0123456789abcdefLL + world.rank(), 3, 4}));
  save_checkpoint_v2(checkpoints, world, header_for(world, 1), saved, saved.names());
  if (world.rank() == 1) {
    ASSERT_TRUE(flip_bit_in_pattern(checkpoints.file_for(1),
                                    int64_bytes(0x0123456789abcdefLL + 1, 1), 0, 2));
  }
  world.barrier();
  try {
    CheckpointReader(checkpoints.file_for(1)).read_blob("trainer_1", "marked");
    FAIL() << "the damaged blob was read";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what())
                  .find("packed blob trainer_1/marked (in /index/trainer_1/packed): checksum "
                        "mismatch"),
              std::string::npos)
        << error.what();
  }
  world.barrier();
}

std::filesystem::path source_file(const std::string& relative) {
  return std::filesystem::path(EPOCHRUN_SOURCE_DIR) / relative;
}

TEST(FormatV2, AVersion1CheckpointStillLoads) {
  // Written by the version 1 writer: `epochrun run --job sgd_regression --num-epochs 4` on 3
  // ranks, before format version 2.
  const auto world = Communicator::world();
  ASSERT_EQ(world.size(), 3);
  ScratchDir directory(world);
  const CheckpointDirectory checkpoints(directory.path());
  if (world.is_root()) {
    std::filesystem::copy_file(source_file("tests/data/v1_sgd_regression_3_ranks_epoch_4.h5"),
                               checkpoints.file_for(4));
  }
  world.barrier();
  CheckpointReader reader(checkpoints.file_for(4));
  EXPECT_EQ(reader.header().format_version, 1);
  EXPECT_EQ(reader.header().job, "sgd_regression");
  const auto state = reader.read_blob("trainer_2", "optimizer_state");
  EXPECT_EQ(state.dtype(), DType::kBytes);
  EXPECT_EQ(state.byte_size(), 144u);
  Workspace loaded;
  const auto names = load_checkpoint(
      checkpoints, world, CheckpointExpectation{4, "sgd_regression", node_names(world)}, loaded);
  EXPECT_EQ(names, (std::vector<std::string>{"bias", "data_cursor", "epochs_remaining", "loss",
                                             "optimizer_state", "weights"}));
  EXPECT_EQ(loaded.get("weights").shape(), Shape{16});
  EXPECT_EQ(loaded.get("epochs_remaining").item<std::int64_t>(), 36);
  world.barrier();
}

// Runs Debian's python3 with `argv` in `cwd`, bounded; the test fails when it does not end in
// 120 s or exits non-zero.
void run_python(const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  std::vector<std::string> command = {SYSTEM_PYTHON};
  command.insert(command.end(), argv.begin(), argv.end());
  ChildProcess python(command, cwd);
  const auto result = python.wait(120);
  ASSERT_TRUE(result.has_value()) << "python did not end";
  EXPECT_EQ(result->exit_code, 0) << argv.back() << "\n" << result->err;
}

// A checkpoint with packed small blobs where the documentation's snippets look for one:
// checkpoints/epoch-000004.h5.
class PackedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    save_checkpoint_v2(CheckpointDirectory(directory_ / "checkpoints"), world_,
                       header_for(world_, 4), saved_, saved_.names());
  }

  void expect_python_loads_every_blob(const std::string& load,
                                      const std::filesystem::path& module_directory);

  const Communicator world_ = Communicator::world();
  ScratchDir directory_{world_};
  const Workspace saved_ = mixed_workspace(world_, 200);
};

// Variable-length strings and arrays in an HDF5 table are one global-heap object per row, which
// HDF5 1.10 writes and reads one by one: 10,000 rows took longer than 10 MB of blobs.
TEST_F(PackedCheckpoint, TheBlobIndexHasOnlyFixedSizeColumns) {
  if (world_.is_root()) {
    const auto path = directory_ / "checkpoints" / "epoch-000004.h5";
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dataset = H5Dopen2(file, "index/trainer_1/blobs", H5P_DEFAULT);
    hid_t type = H5Dget_type(dataset);
    ASSERT_EQ(H5Tget_class(type), H5T_COMPOUND);
    for (int i = 0; i < H5Tget_nmembers(type); ++i) {
      hid_t member = H5Tget_member_type(type, static_cast<unsigned>(i));
      char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
      EXPECT_NE(H5Tget_class(member), H5T_VLEN) << name;
      EXPECT_EQ(H5Tis_variable_str(member), 0) << name;
      H5free_memory(name);
      H5Tclose(member);
    }
    // The longest name is 15 bytes ("optimizer_state"), the most dimensions 2.
    EXPECT_EQ(H5Tget_size(type), 15u + 5 + 1 + 2 * 8 + 1 + 8 + 8);
    EXPECT_EQ(H5Dget_storage_size(dataset), H5Tget_size(type) * saved_.size());
    H5Tclose(type);
    H5Dclose(dataset);
    H5Fclose(file);
  }
  world_.barrier();
}

TEST_F(PackedCheckpoint, EveryPythonSnippetOfTheFormatDocumentReadsIt) {
  if (world_.is_root()) {
    // The version 2 snippets (```python v2 blocks): the others read version 3 files.
    const auto snippets = python_blocks(read_file(source_file("docs/FORMAT.md")), "python v2");
    for (const auto& snippet : snippets) {
      run_python({"-c", snippet}, directory_.path());
    }
    EXPECT_GE(snippets.size(), 2u);
  }
  world_.barrier();
}

// Runs `load` (Python lines that leave `items`, {"NODE/BLOB": numpy array}, from the file
// checkpoints/epoch-000004.h5, with sys.argv[1] = `module_directory` on the path) and expects
// every blob of every node there, bit-identical, with its dtype and shape.
void PackedCheckpoint::expect_python_loads_every_blob(
    const std::string& load, const std::filesystem::path& module_directory) {
  // Every blob as raw bytes in a file per blob plus its dtype and shape.
  const std::string dump = "import json, sys\nsys.path.insert(0, sys.argv[1])\n" + load + R"(
manifest = {}
for key, value in items.items():
    open(key.replace("/", "__") + ".bin", "wb").write(value.tobytes())
    manifest[key] = [str(value.dtype), list(value.shape)]
json.dump(manifest, open("manifest.json", "w"))
)";
  if (world_.is_root()) {
    run_python({"-c", dump, module_directory.string()}, directory_.path());
  }
  world_.barrier();
  const auto manifest = nlohmann::json::parse(read_file(directory_ / "manifest.json"));
  EXPECT_EQ(manifest.size(), saved_.size() * static_cast<std::size_t>(world_.size()));
  const std::map<DType, std::string> numpy = {{DType::kF32, "float32"}, {DType::kF64, "float64"},
                                              {DType::kI32, "int32"},   {DType::kI64, "int64"},
                                              {DType::kU8, "uint8"},    {DType::kBytes, "uint8"}};
  const auto node = "trainer_" + std::to_string(world_.rank());
  for (const auto& [name, blob] : saved_.blobs()) {
    const auto key = node + "/" + name;
    ASSERT_TRUE(manifest.contains(key)) << key;
    EXPECT_EQ(manifest[key][0], numpy.at(blob.dtype())) << key;
    EXPECT_EQ(manifest[key][1].get<Shape>(), blob.shape()) << key;
    const auto bytes = read_file(directory_ / (node + "__" + name + ".bin"));
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), blob.raw().begin(), blob.raw().end(),
                           [](char a, std::byte b) { return static_cast<std::byte>(a) == b; }))
        << key;
  }
  world_.barrier();
}

TEST_F(PackedCheckpoint, LoadCheckpointPyLoadsEveryBlobBitIdentical) {
  expect_python_loads_every_blob(
      "from load_checkpoint import load\nitems = load('checkpoints/epoch-000004.h5')\n",
      source_file("docs"));
}

// The Python package (python/epochrun) on a version 2 file of the real writer: every blob by
// node, packed or not, verified against its checksum as it is read, and nothing found damaged.
TEST_F(PackedCheckpoint, ThePythonPackageReadsEveryBlobVerifiedBitIdentical) {
  expect_python_loads_every_blob(R"(import epochrun
checkpoint = epochrun.open("checkpoints/epoch-000004.h5")
assert checkpoint.format_version == 2 and checkpoint.verify_all() == []
items = {f"{node}/{name}": value for node in checkpoint.node_names
         for name, value in checkpoint.blobs(node).items()}
)",
                                 source_file("python"));
}

}  // namespace
}  // namespace epochrun::testing
