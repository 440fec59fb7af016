// Crafted version 2 checkpoints: a real file written by the writer, changed with the HDF5 C API
// and sealed again as a commit would be (a forger can recompute the integrity header), must be
// refused with a clear error before any blob is read: packed blobs outside their pack or
// overlapping, checksum tables that do not match the index, index rows that contradict their
// datasets, unknown columns or marks, storage that is not the data extents, newer versions.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <functional>

#include "blob_index.hpp"
#include "checkpoint_directory_admin.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "file_descriptor.hpp"
#include "integrity_header.hpp"
#include "refusal.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr int kPacked = 40;  // blobs "b00".."b39", u8[16] each: packed

// One node, "trainer_0": kPacked small blobs (packed), "big" f64[10000] and "state" bytes[70000]
// (own datasets).
std::filesystem::path written_checkpoint(const std::filesystem::path& directory) {
  Workspace workspace;
  for (int i = 0; i < kPacked; ++i) {
    workspace.put((i < 10 ? "b0" : "b") + std::to_string(i),
                  Blob::of<std::uint8_t>(
                      {16}, std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(1 + i))));
  }
  workspace.put("big", Blob::of<double>({10000}, std::vector<double>(10000, 0.5)));
  workspace.put("state", Blob::bytes(std::vector<std::byte>(70000, std::byte{9})));
  CheckpointHeader header;
  header.epoch = 1;
  header.job = "crafted";
  header.node_names = {"trainer_0"};
  header.config_json = "{}";
  save_checkpoint_v2(CheckpointDirectory(directory), Communicator::self(), header, workspace,
                     workspace.names());
  return CheckpointDirectory(directory).file_for(1);
}

// Lets `craft` change the file through HDF5, then seals it again with the data extents it had
// (or `extents`).
void recraft(const std::filesystem::path& file, const std::function<void(hid_t file)>& craft,
             std::optional<std::vector<DataExtent>> extents = std::nullopt) {
  IntegrityHeader integrity;
  {
    FileDescriptor fd(::open(file.c_str(), O_RDONLY));
    integrity = verify_checkpoint_file(fd.get(), file.string());
  }
  hid_t h5file = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(h5file, 0);
  craft(h5file);
  ASSERT_GE(H5Fclose(h5file), 0);
  FileDescriptor fd(::open(file.c_str(), O_RDWR));
  seal_checkpoint_file(fd.get(), file.string(), integrity.user_block_size,
                       extents ? *extents : integrity.extents);
}

std::vector<IndexRow> rows_of(hid_t file) {
  hid_t dataset = H5Dopen2(file, "index/trainer_0/blobs", H5P_DEFAULT);
  auto rows = read_blob_index(dataset, "index", 1 << 30);
  H5Dclose(dataset);
  return rows;
}

// Replaces trainer_0's blob index with `change`d rows.
void change_rows(hid_t file, const std::function<void(std::vector<IndexRow>&)>& change) {
  auto rows = rows_of(file);
  change(rows);
  hid_t group = H5Gopen2(file, "index/trainer_0", H5P_DEFAULT);
  H5Ldelete(group, "blobs", H5P_DEFAULT);
  write_blob_index(group, "blobs", rows.size(), [&](std::size_t i) {
    const auto& row = rows[i];
    return IndexRowView{row.name, row.dtype, row.shape, row.packed, row.offset, row.size};
  });
  H5Gclose(group);
}

IndexRow& row_named(std::vector<IndexRow>& rows, const std::string& name) {
  return *std::find_if(rows.begin(), rows.end(),
                       [&](const IndexRow& row) { return row.name == name; });
}

// Replaces `path` with a new contiguous dataset of `type` and `count` elements, written.
void replace_dataset(hid_t file, const char* path, hid_t type, hsize_t count,
                     hid_t dcpl = H5P_DEFAULT) {
  H5Ldelete(file, path, H5P_DEFAULT);
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t dataset = H5Dcreate2(file, path, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<std::uint64_t> zeros(count, 0);
  H5Dwrite(dataset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  H5Dclose(dataset);
  H5Sclose(space);
}

// The reader's refusal of `file` (CorruptCheckpoint or CheckpointMismatch), or a test failure.
class CraftedV2File : public ::testing::Test {
 protected:
  void expect_refused(const std::function<void(hid_t)>& craft, const std::string& expected,
                      std::optional<std::vector<DataExtent>> extents = std::nullopt) {
    recraft(file_, craft, std::move(extents));
    const auto message = refusal(file_);
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }

  ScratchDir directory_;
  const std::filesystem::path file_ = written_checkpoint(directory_.path());
};

TEST_F(CraftedV2File, TheWrittenFileSealedAgainUnchangedIsAccepted) {
  recraft(file_, [](hid_t) {});
  CheckpointReader reader(file_);
  EXPECT_EQ(reader.header().format_version, 2);
  EXPECT_EQ(reader.read_blob("trainer_0", "b39").as<std::uint8_t>()[0], 40);
  EXPECT_EQ(reader.read_blob("trainer_0", "state").dtype(), DType::kBytes);
}

TEST_F(CraftedV2File, APackedBlobReachingPastItsPackIsRefused) {
  expect_refused([](hid_t file) { change_rows(file, [](auto& rows) { rows[0].offset = 630; }); },
                 "node trainer_0: a packed blob lies outside its pack of 640 bytes");
}

TEST_F(CraftedV2File, AHugePackedOffsetIsRefusedWithoutOverflow) {
  expect_refused(
      [](hid_t file) { change_rows(file, [](auto& rows) { rows[3].offset = ~0ULL - 4; }); },
      "lies outside its pack");
}

TEST_F(CraftedV2File, OverlappingPackedBlobsAreRefused) {
  expect_refused([](hid_t file) { change_rows(file, [](auto& rows) { rows[1].offset = 8; }); },
                 "node trainer_0: packed blobs overlap in its pack");
}

TEST_F(CraftedV2File, AChecksumTableOfTheWrongLengthOrTypeIsRefused) {
  expect_refused(
      [](hid_t file) { replace_dataset(file, "index/trainer_0/xxh64", H5T_STD_U64LE, 41); },
      "checksum table /index/trainer_0/xxh64 is not a uint64 table of one checksum per blob (42)");
  expect_refused(
      [](hid_t file) { replace_dataset(file, "index/trainer_0/xxh64", H5T_STD_I64LE, 42); },
      "is not a uint64 table of one checksum per blob");
}

TEST_F(CraftedV2File, AMissingChecksumTableOrIndexIsNamed) {
  expect_refused([](hid_t file) { H5Ldelete(file, "index/trainer_0/xxh64", H5P_DEFAULT); },
                 "checksum table /index/trainer_0/xxh64 is missing");
  expect_refused([](hid_t file) { H5Ldelete(file, "index/trainer_0", H5P_DEFAULT); },
                 "index group of node trainer_0 is missing");
}

TEST_F(CraftedV2File, AnIndexRowWhoseSizeContradictsItsShapeIsRefused) {
  expect_refused([](hid_t file) { change_rows(file, [](auto& rows) { rows[2].size = 15; }); },
                 "the index says 15 bytes, its dtype and shape 16");
}

TEST_F(CraftedV2File, AnIndexRowThatContradictsItsOwnDatasetIsRefused) {
  expect_refused(
      [](hid_t file) {
        change_rows(file, [](auto& rows) {
          auto& big = row_named(rows, "big");
          big.dtype = DType::kI64;
        });
      },
      "dataset /nodes/trainer_0/big does not have the dtype and shape its index row says");
}

TEST_F(CraftedV2File, AnIndexThatIsNotTheTableOfSevenColumnsIsRefused) {
  expect_refused(
      [](hid_t file) { replace_dataset(file, "index/trainer_0/blobs", H5T_STD_U64LE, 42); },
      "blob index /index/trainer_0/blobs is not a blob index");
}

// Replaces trainer_0's blob index with a table of one row (name "b00", u8[16], packed at 0)
// whose name column is a NUL-padded string of `name_size` bytes (0: variable-length) and whose
// shape column holds `shape_width` dimensions, the row saying `ndim`. A variable-length name
// column is left unwritten (its type is refused).
void replace_index(hid_t file, std::size_t name_size, hsize_t shape_width, std::uint8_t ndim) {
  hid_t name_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(name_type, name_size == 0 ? H5T_VARIABLE : name_size);
  H5Tset_strpad(name_type, H5T_STR_NULLPAD);
  hid_t dtype = H5Tcopy(H5T_C_S1);
  H5Tset_size(dtype, 5);
  H5Tset_strpad(dtype, H5T_STR_NULLPAD);
  hid_t shape = H5Tarray_create2(H5T_STD_U64LE, 1, &shape_width);
  const std::vector<std::pair<const char*, hid_t>> columns = {
      {"name", name_type},      {"dtype", dtype},          {"ndim", H5T_STD_U8LE}, {"shape", shape},
      {"packed", H5T_STD_U8LE}, {"offset", H5T_STD_U64LE}, {"size", H5T_STD_U64LE}};
  std::vector<std::size_t> offsets;
  std::size_t size = 0;
  for (const auto& [column, type] : columns) {
    offsets.push_back(size);
    size += H5Tget_size(type);
  }
  hid_t row_type = H5Tcreate(H5T_COMPOUND, size);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    H5Tinsert(row_type, columns[i].first, offsets[i], columns[i].second);
  }
  std::vector<std::byte> row(size);
  const auto put = [&](std::size_t column, const void* value, std::size_t bytes) {
    std::memcpy(row.data() + offsets[column], value, bytes);
  };
  const std::uint64_t sixteen = 16;
  const std::uint8_t one = 1;
  put(1, "u8", 2);
  put(2, &ndim, 1);
  put(3, &sixteen, 8);
  put(4, &one, 1);
  put(6, &sixteen, 8);
  H5Ldelete(file, "index/trainer_0/blobs", H5P_DEFAULT);
  const hsize_t count = 1;
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t dataset = H5Dcreate2(file, "index/trainer_0/blobs", row_type, space, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
  if (name_size > 0) {
    put(0, "b00", 3);
    H5Dwrite(dataset, row_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, row.data());
  }
  H5Dclose(dataset);
  H5Sclose(space);
  H5Tclose(row_type);
  H5Tclose(shape);
  H5Tclose(dtype);
  H5Tclose(name_type);
}

TEST_F(CraftedV2File, AnIndexWithVariableLengthNamesIsRefused) {
  expect_refused(
      [](hid_t file) { replace_index(file, 0, 1, 1); },
      "blob index /index/trainer_0/blobs is not a blob index (a table of the columns name, "
      "dtype, ndim, shape, packed, offset, size): its column 'name' is not a NUL-padded string "
      "of 1 to 255 bytes");
}

TEST_F(CraftedV2File, AShapeColumnWiderThanAnyBlobCanBeIsRefused) {
  expect_refused([](hid_t file) { replace_index(file, 3, 33, 1); },
                 "its column 'shape' is not an array of 1 to 32 uint64");
}

TEST_F(CraftedV2File, ARowWithMoreDimensionsThanItsShapeColumnIsRefused) {
  expect_refused([](hid_t file) { replace_index(file, 3, 1, 2); },
                 "blob 'b00' has 2 dimensions in a shape column of 1");
}

TEST_F(CraftedV2File, DuplicateNamesInTheIndexAreRefused) {
  expect_refused(
      [](hid_t file) { change_rows(file, [](auto& rows) { rows[1].name = rows[0].name; }); },
      "lists blob 'b00' twice");
}

TEST_F(CraftedV2File, HostileNamesAndDtypesInTheIndexAreRefused) {
  expect_refused(
      [](hid_t file) { change_rows(file, [](auto& rows) { rows[0].name = "../../etc/passwd"; }); },
      "invalid blob name");
}

TEST_F(CraftedV2File, AnUnknownDtypeMarkIsRefused) {
  expect_refused(
      [](hid_t file) {
        hid_t dataset = H5Dopen2(file, "nodes/trainer_0/state", H5P_DEFAULT);
        H5Adelete(dataset, "epochrun_dtype");
        hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        hid_t space = H5Screate(H5S_SCALAR);
        hid_t attribute =
            H5Acreate2(dataset, "epochrun_dtype", type, space, H5P_DEFAULT, H5P_DEFAULT);
        const char* mark = "pickle";
        H5Awrite(attribute, type, &mark);
        H5Aclose(attribute);
        H5Sclose(space);
        H5Tclose(type);
        H5Dclose(dataset);
      },
      "dataset /nodes/trainer_0/state has an unknown epochrun_dtype 'pickle'");
}

TEST_F(CraftedV2File, APackThatIsNotOneOfTheCommittedExtentsIsRefused) {
  // Sealed with the own datasets' extents only: the pack's bytes would be hashed as metadata,
  // but a blob's bytes must be data.
  IntegrityHeader integrity;
  {
    FileDescriptor fd(::open(file_.c_str(), O_RDONLY));
    integrity = verify_checkpoint_file(fd.get(), file_.string());
  }
  auto extents = integrity.extents;
  std::erase_if(extents, [](const DataExtent& extent) { return extent.length == 16 * kPacked; });
  ASSERT_EQ(extents.size(), integrity.extents.size() - 1);
  expect_refused([](hid_t) {}, "does not match the data extents recorded at commit", extents);
}

TEST_F(CraftedV2File, AChunkedPackIsRefusedBeforeAnyRead) {
  expect_refused(
      [](hid_t file) {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        const hsize_t chunk = 64;
        H5Pset_chunk(dcpl, 1, &chunk);
        replace_dataset(file, "index/trainer_0/packed", H5T_STD_U8LE, 640, dcpl);
        H5Pclose(dcpl);
      },
      "pack /index/trainer_0/packed is not stored contiguously");
}

TEST_F(CraftedV2File, AVersion4FileIsRefusedSayingWhatToDo) {
  recraft(file_, [](hid_t file) {
    hid_t attribute = H5Aopen(file, "format_version", H5P_DEFAULT);
    const std::int64_t four = 4;
    H5Awrite(attribute, H5T_NATIVE_INT64, &four);
    H5Aclose(attribute);
  });
  try {
    CheckpointReader reader(file_);
    FAIL() << "accepted";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what())
                  .find("format version 4 is not one this epochrun reads (1 to 3): it was "
                        "written by a newer epochrun; load it with that version"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace epochrun::testing
