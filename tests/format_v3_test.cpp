// Version 3 files laid out and read back in one process: one dataset per blob name whatever the
// rank count, per-node blobs as rows, a replicated blob once, a global array as one dataset of
// its global shape with its writer blocks, ragged values with their index, small blobs in one
// pack; the reader refuses a file whose parts do not match, and h5py reads the whole array.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <numeric>

#include "checkpoint_layout_v3.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "hdf5_checksum.hpp"
#include "layout_replay.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"
#include "stored_file_codec.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::uint64_t kRanks = 3;
const Shape kField{6, 5};
// Per-node "weights": 64 KiB a node, too large for the pack.
constexpr std::uint64_t kWeights = 8192;

// Node r's ragged "samples": 2, 3 and 1 values.
const std::vector<Shape> kSampleShapes = {{2}, {3}, {1}};

FileDescription description() {
  FileDescription file{7, "v3_test", {"trainer_0", "trainer_1", "trainer_2"}, "{}", {}, 1};
  BlobDescription field{"field", StorageKind::kGlobalArray, DType::kF64, kField, 0, {}};
  for (int rank = 0; rank < static_cast<int>(kRanks); ++rank) {
    field.writer_blocks.push_back(balanced_block(kField, static_cast<int>(kRanks), rank));
  }
  file.blobs.push_back(field);
  file.blobs.push_back({"model", StorageKind::kReplicated, DType::kF32, {2, 2}, 0, {}});
  // 40 small per-node blobs: they share the pack.
  for (int i = 0; i < 40; ++i) {
    file.blobs.push_back({"s" + std::string(i < 10 ? "0" : "") + std::to_string(i),
                          StorageKind::kPerNode,
                          DType::kU8,
                          {3},
                          0,
                          {}});
  }
  file.blobs.push_back({"samples", StorageKind::kRagged, DType::kI64, {}, 6, {}});
  file.blobs.push_back({"weights", StorageKind::kPerNode, DType::kF64, {kWeights}, 0, {}});
  return file;
}

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset) {
  ASSERT_EQ(pwrite(fd, data, size, static_cast<off_t>(offset)), static_cast<ssize_t>(size));
}

// Lays out `file` and fills every blob's bytes where the layout says, as the ranks would, then
// seals it; returns the layout.
// `sealed_after_data`: sealed as files written before the seal moved to the lay-out were, the
// index tables covered by the metadata hash instead of listed as data extents.
LayoutV3 write_file(const std::filesystem::path& path, const FileDescription& file,
                    bool sealed_after_data = false) {
  FileDescriptor fd(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));
  const auto layout = lay_out_checkpoint_file_v3(fd.get(), file, [] {});
  const auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < file.blobs.size(); ++i) {
      if (file.blobs[i].name == name) {
        return i;
      }
    }
    throw std::runtime_error(name);
  };
  std::vector<double> field(element_count(kField));
  std::iota(field.begin(), field.end(), 0.0);
  pwrite_all(fd.get(), field.data(), 8 * field.size(), layout.offsets[index_of("field")]);
  const std::vector<float> model = {1, 2, 3, 4};
  pwrite_all(fd.get(), model.data(), 16, layout.offsets[index_of("model")]);
  std::uint64_t ragged_at = 0;
  for (std::uint64_t rank = 0; rank < kRanks; ++rank) {
    std::vector<double> weights(kWeights, static_cast<double>(rank));
    pwrite_all(fd.get(), weights.data(), 8 * kWeights,
               layout.offsets[index_of("weights")] + rank * 8 * kWeights);
    const std::vector<std::uint8_t> small = {static_cast<std::uint8_t>(rank), 1, 2};
    pwrite_all(fd.get(), small.data(), 3,
               layout.pack_offset + rank * layout.pack_row_bytes + layout.in_pack[index_of("s07")]);
    const auto& shape = kSampleShapes[rank];
    std::vector<std::int64_t> samples(shape[0], static_cast<std::int64_t>(rank));
    pwrite_all(fd.get(), samples.data(), 8 * samples.size(),
               layout.offsets[index_of("samples")] + ragged_at);
    const auto row = ragged_index_row(shape, file.ragged_dimensions, ragged_at, 8 * shape[0]);
    pwrite_all(fd.get(), row.data(), row.size(),
               layout.ragged_index_offset + rank * layout.ragged_row_bytes);
    ragged_at += 8 * shape[0];
  }
  auto extents = layout.extents;
  if (sealed_after_data) {
    std::erase_if(extents, [&](const DataExtent& extent) {
      return extent.offset == layout.checksums_offset ||
             extent.offset == layout.ragged_index_offset;
    });
  }
  seal_checkpoint_file(fd.get(), path.string(), layout.user_block_size, extents);
  return layout;
}

StoredFileV3 read_back(const std::filesystem::path& path) {
  FileDescriptor fd(open(path.c_str(), O_RDONLY));
  const auto integrity = verify_checkpoint_file(fd.get(), path.string());
  return read_checkpoint_layout_v3(fd.get(), integrity);
}

class FormatV3 : public ::testing::Test {
 protected:
  ScratchDir directory;
  const std::filesystem::path file = directory / "epoch-000007.h5";
};

TEST_F(FormatV3, ALaidOutFileReadsBackWithEveryBlobWhereItWasPut) {
  const auto written = write_file(file, description());
  const auto stored = read_back(file);
  const auto expected = description();
  ASSERT_EQ(stored.description.blobs.size(), expected.blobs.size());
  for (std::size_t i = 0; i < expected.blobs.size(); ++i) {
    const auto& got = stored.description.blobs[i];
    EXPECT_EQ(got.name, expected.blobs[i].name);
    EXPECT_EQ(got.kind, expected.blobs[i].kind) << got.name;
    EXPECT_EQ(got.dtype, expected.blobs[i].dtype) << got.name;
    EXPECT_EQ(got.shape, expected.blobs[i].shape) << got.name;
    EXPECT_EQ(got.writer_blocks, expected.blobs[i].writer_blocks) << got.name;
  }
  EXPECT_EQ(stored.description.node_names, expected.node_names);
  EXPECT_EQ(stored.layout.offsets, written.offsets);
  EXPECT_EQ(stored.layout.packed, written.packed);
  EXPECT_EQ(stored.layout.in_pack, written.in_pack);
  EXPECT_EQ(stored.layout.pack_offset, written.pack_offset);
  EXPECT_EQ(stored.layout.pack_row_bytes, 40u * 3);
  EXPECT_EQ(stored.layout.checksums_offset, written.checksums_offset);
  // 41 per-node blobs and the ragged one on 3 nodes, the replicated one, 3 writer blocks.
  EXPECT_EQ(stored.checksums.size(), 3u * 42 + 1 + 3);
  ASSERT_EQ(stored.ragged.size(), 1u);
  EXPECT_EQ(stored.ragged[0][1].shape, kSampleShapes[1]);
  EXPECT_EQ(stored.ragged[0][1].offset, 16u);
  EXPECT_EQ(stored.ragged[0][2].size, 8u);
}

// A file sealed after its data step (the index tables under the metadata hash, as every file
// written before the seal moved to the lay-out) reads back the same as one sealed at its
// lay-out, whose extents list the tables.
TEST_F(FormatV3, AFileSealedAfterItsDataStepReadsBackTheSame) {
  const auto written = write_file(file, description(), true);
  const auto stored = read_back(file);
  EXPECT_EQ(stored.layout.offsets, written.offsets);
  EXPECT_EQ(stored.layout.checksums_offset, written.checksums_offset);
  EXPECT_EQ(stored.layout.ragged_index_offset, written.ragged_index_offset);
  EXPECT_EQ(stored.layout.extents.size(), written.extents.size() - 2);
  const auto now = directory / "now.h5";
  write_file(now, description());
  EXPECT_EQ(read_back(now).layout.extents.size(), written.extents.size());
}

// HDF5 keeps a closed file's metadata cache (528 KiB in HDF5 1.10) on its free list for the
// next file's, instead of giving it back to the system and faulting in fresh pages for every
// save's lay-out (h5_library.cpp); with HDF5's default limits a list keeps at most 64 KiB.
// HDF5 counts the bytes its regular free lists have allocated, in use or kept.
std::int64_t regular_free_list_bytes() {
  std::size_t regular = 0;
  std::size_t array = 0;
  std::size_t block = 0;
  std::size_t factory = 0;
  EXPECT_GE(H5get_free_list_sizes(&regular, &array, &block, &factory), 0);
  return static_cast<std::int64_t>(regular);
}

TEST_F(FormatV3, AClosedFileLeavesItsMetadataCacheForTheNextFile) {
  write_file(file, description());  // the library's HDF5 set up, as in a save
  const auto next = directory / "next.h5";
  const hid_t open = H5Fcreate(next.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(open, 0);
  const auto while_open = regular_free_list_bytes();
  ASSERT_GE(H5Fclose(open), 0);
  const auto given_back = while_open - regular_free_list_bytes();
  EXPECT_LT(given_back, std::int64_t{512} << 10)
      << "closing a file gave " << given_back << " bytes of HDF5's free lists back";
}

// The H5Fcreate calls of `lay_out`, and the layout it returns.
template <typename LayOut>
std::pair<LayoutV3, std::int64_t> counted(LayOut&& lay_out) {
  step_times::record_on_this_thread(true);
  auto layout = lay_out();
  std::int64_t creates = 0;
  for (const auto& [call, count] : step_times::take_calls()) {
    creates += call == "H5Fcreate" ? count : 0;
  }
  step_times::record_on_this_thread(false);
  return {std::move(layout), creates};
}

std::pair<LayoutV3, std::int64_t> replayed(const std::filesystem::path& path,
                                           const FileDescription& file) {
  FileDescriptor fd(open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));
  int created = 0;
  auto result = counted([&] { return lay_out_or_replay_v3(fd.get(), file, [&] { ++created; }); });
  EXPECT_EQ(created, 1) << path;
  return result;
}

FileDescription at_epoch(std::int64_t epoch, const std::string& job) {
  auto file = description();
  file.epoch = epoch;
  file.job = job;
  return file;
}

// A save whose description changed in its epoch alone lays its file out without HDF5, and the
// file is byte for byte the one HDF5 lays out for that epoch.
TEST_F(FormatV3, ALayOutReplayedForAnotherEpochIsTheFileHdf5LaysOut) {
  EXPECT_EQ(replayed(directory / "7.h5", at_epoch(7, "replay_test")).second, 1);
  EXPECT_EQ(replayed(directory / "8.h5", at_epoch(8, "replay_test")).second, 1);
  // The two HDF5 lay-outs showed which bytes the epoch changes: the third is replayed.
  const auto [layout, creates] = replayed(directory / "300.h5", at_epoch(300, "replay_test"));
  EXPECT_EQ(creates, 0);
  const auto made = directory / "made.h5";
  {
    FileDescriptor fd(open(made.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));
    EXPECT_EQ(lay_out_checkpoint_file_v3(fd.get(), at_epoch(300, "replay_test"), [] {}), layout);
  }
  const auto replayed_bytes = read_regular_file(directory / "300.h5", 1 << 24);
  ASSERT_EQ(replayed_bytes.size(), read_regular_file(made, 1 << 24).size());
  EXPECT_TRUE(replayed_bytes == read_regular_file(made, 1 << 24));
  // Another description is laid out by HDF5 until two of its lay-outs prove its patch, and the
  // first is still replayed in between (a process may save two kinds of checkpoint in turn).
  auto other = at_epoch(301, "replay_test");
  other.blobs.back().shape = {kWeights / 2};
  EXPECT_EQ(replayed(directory / "301.h5", other).second, 1);
  EXPECT_EQ(replayed(directory / "302.h5", at_epoch(302, "replay_test")).second, 0);
  other.epoch = 303;
  EXPECT_EQ(replayed(directory / "303.h5", other).second, 1);
  other.epoch = 304;
  EXPECT_EQ(replayed(directory / "304.h5", other).second, 0);
}

// HDF5's checksum of metadata (lookup3), as HDF5's own test vectors have it.
TEST(Hdf5MetadataChecksum, MatchesLookup3) {
  const std::string four_score = "Four score and seven years ago";
  EXPECT_EQ(hdf5_metadata_checksum({}), 0xdeadbeefu);
  EXPECT_EQ(hdf5_metadata_checksum(std::as_bytes(std::span(four_score))), 0x17770551u);
}

TEST_F(FormatV3, TheMetadataDoesNotGrowWithTheRankCount) {
  // The same blobs at 3 and at 300 ranks: the same number of datasets and index rows.
  auto many = description();
  many.node_names.clear();
  for (int rank = 0; rank < 300; ++rank) {
    many.node_names.push_back("trainer_" + std::to_string(rank));
  }
  many.blobs.pop_back();  // no 64 KiB a node: the file stays small
  for (auto& blob : many.blobs) {
    if (blob.kind == StorageKind::kRagged) {
      blob.ragged_elements = 300;
    }
  }
  FileDescriptor fd(open((directory / "many.h5").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644));
  const auto layout = lay_out_checkpoint_file_v3(fd.get(), many, [] {});
  // field, model, samples, the pack, the checksum table and the ragged index: six extents at
  // any rank count.
  EXPECT_EQ(layout.extents.size(), 6u);
  const auto small = std::filesystem::file_size(directory / "many.h5");
  // Metadata: the node names and, per node, 41 checksums and a ragged row, under 1 KiB a node.
  EXPECT_LT(small, 300u * 1024);
}

// What rank 0 broadcasts of a file it read comes out on the other ranks as it went in, and a
// cut or padded buffer is refused rather than read past its end.
TEST_F(FormatV3, TheBroadcastLayoutDecodesToWhatWasRead) {
  write_file(file, description());
  const auto stored = read_back(file);
  const auto bytes = encode_stored_file(stored);
  const auto decoded = decode_stored_file(bytes);
  EXPECT_EQ(encode_stored_file(decoded), bytes);
  EXPECT_EQ(decoded.description.node_names, stored.description.node_names);
  ASSERT_EQ(decoded.description.blobs.size(), stored.description.blobs.size());
  for (std::size_t i = 0; i < stored.description.blobs.size(); ++i) {
    EXPECT_EQ(decoded.description.blobs[i].writer_blocks,
              stored.description.blobs[i].writer_blocks);
    EXPECT_EQ(decoded.description.blobs[i].shape, stored.description.blobs[i].shape);
  }
  EXPECT_EQ(decoded.layout.offsets, stored.layout.offsets);
  EXPECT_EQ(decoded.layout.packed, stored.layout.packed);
  EXPECT_EQ(decoded.checksums, stored.checksums);
  ASSERT_EQ(decoded.ragged.size(), stored.ragged.size());
  EXPECT_EQ(decoded.ragged[0].back().shape, stored.ragged[0].back().shape);
  EXPECT_EQ(decoded.ragged[0].back().offset, stored.ragged[0].back().offset);
  auto cut = bytes;
  cut.pop_back();
  EXPECT_THROW(decode_stored_file(cut), MpiError);
  auto padded = bytes;
  padded.push_back(std::byte{0});
  EXPECT_THROW(decode_stored_file(padded), MpiError);
}

TEST_F(FormatV3, AGlobalArrayWhoseWriterBlocksDoNotTileItIsRefused) {
  auto broken = description();
  broken.blobs[0].writer_blocks[2].count[0] -= 1;  // a row of rank 2's block is missing
  write_file(file, broken);
  try {
    read_back(file);
    FAIL() << "a global array with a gap was read";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("global array 'field' of shape [6, 5]"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(FormatV3, H5pyReadsTheGlobalArrayWholeAndAPerNodeBlobByRow) {
  write_file(file, description());
  const std::string script = R"(
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["format_version"] == 3
    field = f["arrays/field"][...]
    assert field.shape == (6, 5) and (field == np.arange(30).reshape(6, 5)).all(), field
    assert (f["nodes/weights"][2] == 2).all()
    assert (f["replicated/model"][...] == [[1, 2], [3, 4]]).all()
    print(f["arrays/field"].attrs["epochrun_block_starts"].tolist())
)";
  const auto result = run_process({SYSTEM_PYTHON, "-c", script, file.string()}, directory.path());
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[[0, 0], [2, 0], [4, 0]]\n");
}

}  // namespace
}  // namespace epochrun::testing
