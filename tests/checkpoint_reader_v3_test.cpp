// Version 3 files as one process reads them, with no MPI: CheckpointReader (per-node blobs of
// one shape, of different shapes and packed, a replicated blob, a 2-D global array whole and in
// parts that cross writer blocks, a damaged byte of the array), CheckpointDirectory::load_blobs,
// `epochrun inspect` (listing, --blobs, --verify, --show, --diff, --export read back by numpy)
// and the version 3 snippets of docs/FORMAT.md. The files are written by PendingCheckpointV3 on
// 3 ranks; everything after that runs on rank 0.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <numeric>

#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "integrity_header.hpp"
#include "launch.hpp"
#include "pending_checkpoint_v3.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kTimeout{60};
const Shape kField{7, 5};

// How the field is split over the 3 writing ranks: the balanced 3x1 grid (row bands), or 1x3
// (column bands).
const std::vector<int> kRows{3, 1};
const std::vector<int> kColumns{1, 3};

// What one epoch's file holds, beyond what every epoch shares.
struct Epoch {
  std::int64_t epoch;
  std::vector<int> grid;  // the field's decomposition
  float model_scale;      // the replicated model is {1, 2, 3, 4} times this
  double weight_of_rank_1;
  double changed_cell;  // added to the field's cell (6, 4)
};
const Epoch kEpoch4{4, kRows, 1, 1.5, 0};
const Epoch kEpoch5{5, kColumns, 2, 7.0, 0};  // the same field in other blocks
const Epoch kEpoch6{6, kColumns, 2, 7.0, 1};  // one cell of the field changed

double cell(std::uint64_t row, std::uint64_t column, const Epoch& epoch) {
  const double value = static_cast<double>(row * kField[1] + column);
  return row == 6 && column == 4 ? value + epoch.changed_cell : value;
}

Blob field_part(const Block& block, const Epoch& epoch) {
  std::vector<double> values;
  for (auto r = block.start[0]; r < block.start[0] + block.count[0]; ++r) {
    for (auto c = block.start[1]; c < block.start[1] + block.count[1]; ++c) {
      values.push_back(cell(r, c, epoch));
    }
  }
  return Blob::of<double>(block.count, values);
}

Blob weights_of(int rank, const Epoch& epoch) {
  const double weight = rank == 1 ? epoch.weight_of_rank_1 : 1.5 * rank;
  // 80,000 bytes: over the packing threshold of 64 KiB, so /nodes/weights holds it.
  return Blob::of<double>({10000}, std::vector<double>(10000, weight));
}

// Rank r's samples: r + 1 values from 10 r, so the blob is ragged.
Blob samples_of(int rank) {
  std::vector<std::int64_t> samples(static_cast<std::size_t>(rank) + 1);
  std::iota(samples.begin(), samples.end(), 10 * rank);
  return Blob::of<std::int64_t>({samples.size()}, samples);
}

Blob small_of(int rank, int i) {
  return Blob::of<std::uint8_t>({3}, std::vector<std::uint8_t>{static_cast<std::uint8_t>(rank),
                                                               static_cast<std::uint8_t>(i), 7});
}

Blob model_of(const Epoch& epoch) {
  const float s = epoch.model_scale;
  return Blob::of<float>({2, 2}, std::vector<float>{s, 2 * s, 3 * s, 4 * s});
}

std::string small_name(int i) {
  return "small_" + std::to_string(100 + i);
}

// Saves `epoch` from every rank as checkpoints/epoch-00000N.h5 under `directory`.
void save(const Communicator& world, const fs::path& directory, const Epoch& epoch) {
  const int rank = world.rank();
  auto blocks = std::make_shared<std::vector<Block>>();
  for (int r = 0; r < world.size(); ++r) {
    blocks->push_back(grid_block(kField, epoch.grid, r));
  }
  Workspace workspace;
  workspace.put("weights", weights_of(rank, epoch));
  workspace.put("samples", samples_of(rank));
  for (int i = 0; i < 40; ++i) {
    workspace.put(small_name(i), small_of(rank, i));
  }
  workspace.put("model", model_of(epoch));
  workspace.put("field", field_part((*blocks)[static_cast<std::size_t>(rank)], epoch));
  std::vector<SavedBlob> saved;
  for (const auto& [name, blob] : workspace.blobs()) {
    SavedBlob one{BlobView{name, blob.dtype(), blob.shape(), blob.raw(), {}, false, {}},
                  StorageKind::kPerNode,
                  {},
                  {}};
    if (name == "model") {
      one.kind = StorageKind::kReplicated;
    } else if (name == "field") {
      one = SavedBlob{one.view, StorageKind::kGlobalArray, kField, blocks};
    }
    saved.push_back(std::move(one));
  }
  SavedFile root{epoch.epoch, "v3_job", {}, "{\"rate\": \"0.5\"}"};
  for (int r = 0; r < world.size(); ++r) {
    root.node_names.push_back("trainer_" + std::to_string(r));
  }
  const auto file = directory / "checkpoints" / checkpoint_file_name(epoch.epoch);
  auto pending = PendingCheckpointV3::begin(file, world, root, std::move(saved), kTimeout);
  pending.write_data();
  pending.write_arrays();
  pending.finish();
}

ProcessResult bounded(const std::vector<std::string>& argv, const fs::path& cwd) {
  return run_within(argv, cwd, 120);
}

ProcessResult inspect(const std::vector<std::string>& args, const fs::path& cwd) {
  std::vector<std::string> argv = {EPOCHRUN_BINARY, "inspect"};
  argv.insert(argv.end(), args.begin(), args.end());
  return bounded(argv, cwd);
}

// Epochs 4, 5 and 6 saved once for every test (which only read them) in checkpoints/.
class ReaderV3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto world = Communicator::world();
    directory_ = new ScratchDir(world);
    if (world.is_root()) {
      fs::create_directory(directory_->path() / "checkpoints");
    }
    world.barrier();
    for (const auto& epoch : {kEpoch4, kEpoch5, kEpoch6}) {
      save(world, directory_->path(), epoch);
    }
  }
  static void TearDownTestSuite() {
    delete directory_;
    directory_ = nullptr;
  }
  void TearDown() override { world_.barrier(); }

  static fs::path directory() { return directory_->path(); }
  static fs::path file(std::int64_t epoch) {
    return directory() / "checkpoints" / checkpoint_file_name(epoch);
  }

  const Communicator world_ = Communicator::world();
  static ScratchDir* directory_;
};
ScratchDir* ReaderV3::directory_ = nullptr;

TEST_F(ReaderV3, TheHeaderShowsEveryKindOfBlob) {
  if (!world_.is_root()) {
    return;
  }
  CheckpointReader reader(file(4));
  const auto& header = reader.header();
  EXPECT_EQ(header.format_version, 3);
  EXPECT_EQ(header.epoch, 4);
  EXPECT_EQ(header.job, "v3_job");
  ASSERT_EQ(header.node_names.size(), 3U);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& records = header.blobs.at("trainer_" + std::to_string(rank));
    EXPECT_EQ(records.size(), 42U);  // weights, samples and the 40 small ones; not model, field
    const auto samples = std::find_if(records.begin(), records.end(),
                                      [](const BlobRecord& r) { return r.name == "samples"; });
    ASSERT_NE(samples, records.end());
    EXPECT_EQ(samples->shape, (Shape{static_cast<std::uint64_t>(rank) + 1}));
  }
  ASSERT_EQ(header.replicated.size(), 1U);
  EXPECT_EQ(header.replicated[0].name, "model");
  EXPECT_EQ(header.replicated[0].shape, (Shape{2, 2}));
  ASSERT_EQ(header.arrays.size(), 1U);
  const auto& field = header.arrays[0];
  EXPECT_EQ(field.name, "field");
  EXPECT_EQ(field.dtype, DType::kF64);
  EXPECT_EQ(field.global_shape, kField);
  ASSERT_EQ(field.writer_blocks.size(), 3U);
  EXPECT_EQ(field.writer_xxh64.size(), 3U);
  EXPECT_EQ(field.writer_blocks[1], (Block{{3, 0}, {2, 5}}));
  // 3 x (10,000 doubles + 40 x 3 bytes) + 1 + 2 + 3 samples + the model + the field.
  EXPECT_EQ(header.total_blob_bytes(), 3 * (80000 + 120) + 6 * 8 + 16 + 35 * 8);
}

TEST_F(ReaderV3, EveryBlobReadsBackAsSaved) {
  if (!world_.is_root()) {
    return;
  }
  CheckpointReader reader(file(4));
  for (int rank = 0; rank < 3; ++rank) {
    const auto node = "trainer_" + std::to_string(rank);
    EXPECT_EQ(reader.read_blob(node, "weights"), weights_of(rank, kEpoch4)) << node;
    EXPECT_EQ(reader.read_blob(node, "samples"), samples_of(rank)) << node;  // ragged
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(reader.read_blob(node, small_name(i)), small_of(rank, i)) << node;  // packed
    }
  }
  EXPECT_EQ(reader.read_replicated("model"), model_of(kEpoch4));
  const Block whole{{0, 0}, kField};
  EXPECT_EQ(reader.read_array("field"), field_part(whole, kEpoch4));
  EXPECT_THROW(reader.read_blob("trainer_0", "model"), CheckpointError);
  EXPECT_THROW(reader.read_replicated("weights"), CheckpointError);
  EXPECT_THROW(reader.read_array("model"), CheckpointError);
}

TEST_F(ReaderV3, AnyPartOfTheArrayReadsBackWhateverBlocksWroteIt) {
  if (!world_.is_root()) {
    return;
  }
  // Rows 2..5 and columns 1..3 cross the row bands of epoch 4 and the column bands of epoch 5;
  // rows 0..3 hold epoch 4's first block whole and a part of its second, columns 1..4 epoch 5's
  // last two blocks whole and a part of its first (a block wholly inside the part is read
  // straight into it, the others' cells copied).
  const std::vector<Block> parts = {{{2, 1}, {4, 3}}, {{0, 0}, {7, 1}}, {{6, 4}, {1, 1}},
                                    {{3, 0}, {2, 5}}, {{0, 0}, kField}, {{1, 2}, {0, 3}},
                                    {{0, 0}, {4, 5}}, {{0, 1}, {7, 4}}};
  for (const std::int64_t epoch : {4, 5}) {
    CheckpointReader reader(file(epoch));
    for (const auto& part : parts) {
      EXPECT_EQ(reader.read_array("field", part), field_part(part, kEpoch4))
          << "epoch " << epoch << " part " << block_to_string(part);
    }
  }
  CheckpointReader reader(file(4));
  EXPECT_THROW(reader.read_array("field", Block{{5, 0}, {3, 5}}), UsageError);
  EXPECT_THROW(reader.read_array("field", Block{{0}, {7}}), UsageError);
}

TEST_F(ReaderV3, ADamagedByteInsideTheArrayIsCorruptWhereverAPartMeetsItsBlock) {
  if (!world_.is_root()) {
    return;
  }
  ScratchDir scratch;
  const auto damaged = scratch / "damaged.h5";
  fs::copy_file(file(4), damaged);
  {
    // A byte of cell (3, 2), inside writer block 1 (rows 3..4).
    FileDescriptor fd(::open(damaged.c_str(), O_RDWR));
    const auto stored = read_checkpoint_layout_v3(fd.get(), verify_checkpoint_file(fd.get(), "t"));
    std::size_t field = 0;
    while (stored.description.blobs[field].name != "field") {
      ++field;
    }
    const char byte = 0x5a;
    ASSERT_EQ(::pwrite(fd.get(), &byte, 1,
                       static_cast<off_t>(stored.layout.offsets[field] + 8 * (3 * 5 + 2) + 3)),
              1);
  }
  CheckpointReader reader(damaged);  // the data is not read at opening
  try {
    reader.read_array("field");
    FAIL() << "a damaged array read back";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("writer block 1 [3:5, 0:5]"), std::string::npos)
        << error.what();
  }
  // A part that meets block 1 anywhere reads the whole block, so the damage is found even
  // when the part leaves the damaged cell out; a part of block 0 alone is intact.
  EXPECT_THROW(reader.read_array("field", Block{{4, 4}, {1, 1}}), CorruptCheckpoint);
  EXPECT_EQ(reader.read_array("field", Block{{0, 0}, {3, 5}}),
            field_part(Block{{0, 0}, {3, 5}}, kEpoch4));
  auto verify = inspect({damaged.string(), "--verify"}, scratch.path());
  EXPECT_EQ(verify.exit_code, 3) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("found: arrays/field: "), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("writer block 1 [3:5, 0:5]: checksum mismatch"), std::string::npos)
      << verify.out;
}

// The error a read or a verification of the reader throws: what() of its CorruptCheckpoint.
template <typename Call>
std::string corrupt_error(Call&& call) {
  try {
    call();
  } catch (const CorruptCheckpoint& error) {
    return error.what();
  }
  return "(no error)";
}

// `bytes` written at `offset` of `file`.
void write_bytes(const fs::path& file, std::uint64_t offset, const std::string& bytes) {
  FileDescriptor fd(::open(file.c_str(), O_RDWR));
  ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
}

// The verifications that keep no bytes verify what the reads read, row bands and column bands
// alike, and say how many bytes; a name the file lacks is refused as the read refuses it.
TEST_F(ReaderV3, EveryValueVerifiesAsItReads) {
  if (!world_.is_root()) {
    return;
  }
  for (const std::int64_t epoch : {4, 5}) {
    CheckpointReader reader(file(epoch));
    for (const auto& [node, records] : reader.header().blobs) {
      for (const auto& record : records) {
        EXPECT_EQ(reader.verify_blob(node, record.name), record.byte_size())
            << node << "/" << record.name;
      }
    }
    EXPECT_EQ(reader.verify_replicated("model"), 16U);
    EXPECT_EQ(reader.verify_array("field"), 7U * 5U * 8U);
    EXPECT_THROW(reader.verify_blob("trainer_0", "model"), CheckpointError);
    EXPECT_THROW(reader.verify_blob("nobody", "weights"), CheckpointError);
    EXPECT_THROW(reader.verify_replicated("weights"), CheckpointError);
    EXPECT_THROW(reader.verify_array("model"), CheckpointError);
  }
}

// A damaged byte is refused by a verification in the words of the read of the same value: a
// node's value, and the first damaged writer block (in writer order) of an array written in
// column bands, whose blocks' cells interleave in the file.
TEST_F(ReaderV3, AVerificationRefusesADamagedValueInTheReadsWords) {
  if (!world_.is_root()) {
    return;
  }
  ScratchDir scratch;
  const auto damaged = scratch / "damaged.h5";
  fs::copy_file(file(5), damaged);
  std::uint64_t field_offset = 0;
  std::uint64_t weights_offset = 0;
  {
    FileDescriptor fd(::open(damaged.c_str(), O_RDONLY));
    const auto stored = read_checkpoint_layout_v3(fd.get(), verify_checkpoint_file(fd.get(), "t"));
    for (std::size_t i = 0; i < stored.description.blobs.size(); ++i) {
      if (stored.description.blobs[i].name == "field") {
        field_offset = stored.layout.offsets[i];
      }
      if (stored.description.blobs[i].name == "weights") {
        weights_offset = stored.layout.offsets[i];
      }
    }
  }
  ASSERT_GT(field_offset, 0U);
  ASSERT_GT(weights_offset, 0U);
  // Cells (6, 4) in writer block 2 (columns 4..4) and (2, 2) in writer block 1 (columns 2..3);
  // node 1's weights (80,000 bytes each, node after node).
  write_bytes(damaged, field_offset + 8 * (6 * 5 + 4) + 1, "\x5a");
  write_bytes(damaged, field_offset + 8 * (2 * 5 + 2) + 1, "\x5a");
  write_bytes(damaged, weights_offset + 80000 + 12345, "\x5a");
  CheckpointReader reader(damaged);
  const auto read = corrupt_error([&] { reader.read_array("field"); });
  EXPECT_NE(read.find("writer block 1 [0:7, 2:4]: checksum mismatch"), std::string::npos) << read;
  EXPECT_EQ(corrupt_error([&] { reader.verify_array("field"); }), read);
  const auto blob = corrupt_error([&] { reader.read_blob("trainer_1", "weights"); });
  EXPECT_NE(blob.find("checksum mismatch"), std::string::npos) << blob;
  EXPECT_EQ(corrupt_error([&] { reader.verify_blob("trainer_1", "weights"); }), blob);
  EXPECT_EQ(reader.verify_blob("trainer_0", "weights"), 80000U);
}

TEST_F(ReaderV3, LoadBlobsTakesReplicatedBlobsAndWholeArraysWithoutANode) {
  if (!world_.is_root()) {
    return;
  }
  Workspace workspace;
  ASSERT_TRUE(
      CheckpointDirectory(directory() / "checkpoints")
          .load_blobs(
              5, {{"trainer_2", "samples", ""}, {"", "model", ""}, {"", "field", "whole_field"}},
              workspace));
  EXPECT_EQ(workspace.get("samples"), samples_of(2));
  EXPECT_EQ(workspace.get("model"), model_of(kEpoch5));
  EXPECT_EQ(workspace.get("whole_field"), field_part(Block{{0, 0}, kField}, kEpoch5));
}

TEST_F(ReaderV3, InspectListsReplicatedBlobsAndArraysWithTheirDecomposition) {
  if (!world_.is_root()) {
    return;
  }
  auto json = inspect({"checkpoints", "--blobs", "--epoch", "4", "--json"}, directory());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto entry = nlohmann::json::parse(json.out)["checkpoints"][0];
  EXPECT_EQ(entry["format_version"], 3);
  EXPECT_EQ(entry["num_blobs"], 3 * 42 + 2);
  EXPECT_EQ(entry["num_replicated"], 1);
  EXPECT_EQ(entry["num_arrays"], 1);
  EXPECT_EQ(entry["nodes"]["trainer_2"].size(), 42U);
  EXPECT_EQ(entry["replicated"][0]["name"], "model");
  const auto& field = entry["arrays"][0];
  EXPECT_EQ(field["shape"], (Shape{7, 5}));
  EXPECT_EQ(field["writers"], 3);
  EXPECT_EQ(field["process_grid"], (std::vector<int>{3, 1}));
  EXPECT_EQ(field["blocks"][2]["start"], (Shape{5, 0}));
  EXPECT_EQ(field["blocks"][2]["count"], (Shape{2, 5}));

  auto text = inspect({"checkpoints", "--blobs"}, directory());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  for (const std::string expected :
       {"format 3 (126 per-node, 1 replicated, 1 global arrays)",
        "  replicated/\n    model  f32[2, 2]",
        "  arrays/\n    field  f64[7, 5]  280 bytes  written by 3 ranks over a 3x1 process grid\n",
        "      writer 1  [3:5, 0:5]  xxh64 ", "over a 1x3 process grid", "writer 2  [0:7, 4:5]",
        "  trainer_1/\n", "    samples    i64[2]"}) {
    EXPECT_NE(text.out.find(expected), std::string::npos) << expected << "\n" << text.out;
  }
  auto verify = inspect({"checkpoints", "--verify"}, directory());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("128 blobs' xxh64"), std::string::npos) << verify.out;  // 126 + 1 + 1
  auto show = inspect({"checkpoints", "--epoch", "4", "--show", "arrays/field"}, directory());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("arrays/field  f64[7, 5]  280 bytes"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("[30. 31. 32. 33. 34.]]"), std::string::npos) << show.out;
  auto model = inspect({"checkpoints", "--epoch", "5", "--show", "replicated/model"}, directory());
  EXPECT_NE(model.out.find("[[2. 4.]\n [6. 8.]]"), std::string::npos) << model.out << model.err;
}

TEST_F(ReaderV3, DiffComparesArraysWholeWhateverBlocksWroteThem) {
  if (!world_.is_root()) {
    return;
  }
  const auto changed = [&](const std::string& from, const std::string& to) {
    auto diff = inspect({"checkpoints", "--diff", from, to, "--json"}, directory());
    EXPECT_EQ(diff.exit_code, 0) << diff.err;
    const auto parsed = nlohmann::json::parse(diff.out);
    std::vector<std::string> names;
    for (const auto& blob : parsed["changed"]) {
      names.push_back(blob["blob"].get<std::string>());
    }
    return names;
  };
  // Epoch 5 holds the same field in column bands instead of row bands: unchanged.
  EXPECT_EQ(changed("4", "5"), (std::vector<std::string>{"trainer_1/weights", "replicated/model"}));
  EXPECT_EQ(changed("5", "6"), (std::vector<std::string>{"arrays/field"}));
  auto text = inspect({"checkpoints", "--diff", "5", "6"}, directory());
  EXPECT_NE(text.out.find("changed  arrays/field  f64[7, 5]  values differ\n"), std::string::npos)
      << text.out;
}

TEST_F(ReaderV3, ExportWritesEachArrayWholeAndEachReplicatedBlobOnce) {
  if (!world_.is_root()) {
    return;
  }
  for (const std::string epoch : {"4", "5"}) {
    ScratchDir cwd;
    auto exported = inspect(
        {(directory() / "checkpoints").string(), "--epoch", epoch, "--export", "out", "--json"},
        cwd.path());
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    EXPECT_EQ(nlohmann::json::parse(exported.out)["files"].size(), 3U * 42 + 2);
    const auto check = bounded({SYSTEM_PYTHON, "-c", R"(
import numpy as np
field = np.load("out/arrays/field.npy")
assert field.dtype == np.float64 and field.shape == (7, 5), (field.dtype, field.shape)
assert (field == np.arange(35, dtype=np.float64).reshape(7, 5)).all(), field
model = np.load("out/replicated/model.npy")
assert model.dtype == np.float32 and (model == np.array([[1, 2], [3, 4]]) * model[0, 0]).all()
assert (np.load("out/trainer_2/samples.npy") == [20, 21, 22]).all()
assert (np.load("out/trainer_1/small_139.npy") == [1, 39, 7]).all()
assert np.load("out/trainer_0/weights.npy").shape == (10000,)
)"},
                               cwd.path());
    EXPECT_EQ(check.exit_code, 0) << "epoch " << epoch << "\n" << check.err;
  }
}

// docs/FORMAT.md's version 3 snippets (```python blocks, and ```python global-array for the one
// that needs a global array `field`) on a version 3 file where they look for one:
// checkpoints/epoch-000004.h5, with Debian's h5py.
TEST_F(ReaderV3, TheFormatDocumentsVersion3SnippetsRun) {
  if (!world_.is_root()) {
    return;
  }
  const auto document = read_file(fs::path(EPOCHRUN_SOURCE_DIR) / "docs/FORMAT.md");
  auto snippets = python_blocks(document);
  const auto array_snippets = python_blocks(document, "python global-array");
  EXPECT_GE(snippets.size(), 2U);
  EXPECT_GE(array_snippets.size(), 1U);
  snippets.insert(snippets.end(), array_snippets.begin(), array_snippets.end());
  for (const auto& snippet : snippets) {
    auto python = bounded({SYSTEM_PYTHON, "-c", snippet}, directory());
    EXPECT_EQ(python.exit_code, 0) << snippet << "\n" << python.err;
  }
}

// docs/load_checkpoint.py: every node's per-node values, the replicated blob once, the array
// whole.
TEST_F(ReaderV3, LoadCheckpointPyLoadsAVersion3File) {
  if (!world_.is_root()) {
    return;
  }
  auto loaded = bounded({SYSTEM_PYTHON, "-c", R"(
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from load_checkpoint import load
state = load("checkpoints/epoch-000004.h5")
assert len(state) == 3 * 42 + 2, len(state)
assert (state["arrays/field"] == np.arange(35.0).reshape(7, 5)).all()
assert (state["replicated/model"] == [[1, 2], [3, 4]]).all()
assert (state["trainer_2/samples"] == [20, 21, 22]).all()
assert state["trainer_0/samples"].dtype == np.int64
assert (state["trainer_1/small_139"] == [1, 39, 7]).all()
assert (state["trainer_1/weights"] == 1.5).all() and state["trainer_1/weights"].shape == (10000,)
)",
                         EPOCHRUN_SOURCE_DIR "/docs"},
                        directory());
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
}

// The Python package (python/epochrun) on the same file: a ragged, a packed and a plain per-node
// blob by node, the replicated blob, the array whole and a part across writer blocks, each
// verified as it is read, and nothing in the file found damaged.
TEST_F(ReaderV3, ThePythonPackageReadsAVersion3FileVerified) {
  if (!world_.is_root()) {
    return;
  }
  auto loaded = bounded({SYSTEM_PYTHON, "-c", R"(
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import epochrun
checkpoint = epochrun.open("checkpoints").epoch(4)
assert checkpoint.verify_all() == []
assert len(checkpoint.per_node_names) == 42 and checkpoint.replicated_names == ["model"]
field = np.arange(35.0).reshape(7, 5)
assert (checkpoint.array("field") == field).all()
assert (checkpoint.array("field", np.s_[2:6, 1:4]) == field[2:6, 1:4]).all()
assert (checkpoint.replicated("model") == [[1, 2], [3, 4]]).all()
assert (checkpoint.blob("samples", node="trainer_2") == [20, 21, 22]).all()
assert checkpoint.blob("samples", node=0).dtype == np.int64
assert (checkpoint.blob("small_139", node=1) == [1, 39, 7]).all()
weights = checkpoint.blobs("trainer_1")["weights"]
assert (weights == 1.5).all() and weights.shape == (10000,)
)",
                         EPOCHRUN_SOURCE_DIR "/python"},
                        directory());
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
}

}  // namespace
}  // namespace epochrun::testing
