#include "blob_index.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string_view>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "error_table.hpp"
#include "h5_creation.hpp"
#include "h5_handle.hpp"
#include "h5_objects.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// Rows are written and read as the file stores them: little-endian, packed.
static_assert(std::endian::native == std::endian::little,
              "blob index rows are built as little-endian bytes");

// Only fixed-size columns: a variable-length string or shape is one object in HDF5's global
// heap per row, which made 10,000 rows cost more than the blobs' own bytes.
// Version 3 adds `kind` as the last column.
enum Column : std::size_t {
  kName,
  kDType,
  kNdim,
  kShape,
  kPacked,
  kOffset,
  kSize,
  kKind,
  kColumnCount
};
constexpr std::array<const char*, kColumnCount> kColumns = {"name",   "dtype",  "ndim", "shape",
                                                            "packed", "offset", "size", "kind"};

std::size_t column_count(IndexColumns columns) {
  return columns == IndexColumns::kWithKind ? kColumnCount : kColumnCount - 1;
}
// "bytes", the longest dtype name.
constexpr std::size_t kDTypeWidth = 5;

// The widths of a table's variable columns and where each column lies in a row.
struct RowShape {
  IndexColumns columns = IndexColumns::kVersion2;
  std::size_t name_width = 1;  // bytes of the name column: the longest name, NUL-padded
  std::size_t dtype_width = kDTypeWidth;
  std::size_t shape_width = 1;  // dimensions in the shape column: the most any row has
  std::array<std::size_t, kColumnCount> offsets{};
  std::size_t size = 0;

  // Wide enough for a row of this name and shape.
  void widen_to(std::string_view name, std::span<const std::uint64_t> dimensions) {
    name_width = std::max(name_width, name.size());
    shape_width = std::max(shape_width, dimensions.size());
  }

  void place_columns() {
    const std::array<std::size_t, kColumnCount> sizes = {
        name_width, dtype_width, 1, 8 * shape_width, 1, 8, 8, 1};
    size = 0;
    for (std::size_t i = 0; i < column_count(columns); ++i) {
      offsets[i] = size;
      size += sizes[i];
    }
  }
};

Handle string_type(std::size_t width) {
  Handle type(H5Tcopy(H5T_C_S1), "copy string type");
  h5::check(H5Tset_size(type.get(), width), "set string size");
  h5::check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "set string padding");
  return type;
}

// The packed compound of a row shaped `shape`, with `uint64`/`uint8` integers (the file's
// little-endian ones or the native ones) and `name`/`dtype` string types.
Handle row_type(const RowShape& shape, hid_t name, hid_t dtype, hid_t uint64, hid_t uint8) {
  const hsize_t dimensions = shape.shape_width;
  Handle dims(H5Tarray_create2(uint64, 1, &dimensions), "create shape type");
  const std::array<hid_t, kColumnCount> members = {name,  dtype,  uint8,  dims.get(),
                                                   uint8, uint64, uint64, uint8};
  Handle type(H5Tcreate(H5T_COMPOUND, shape.size), "create index row type");
  for (std::size_t i = 0; i < column_count(shape.columns); ++i) {
    h5::check(H5Tinsert(type.get(), kColumns[i], shape.offsets[i], members[i]),
              "build index row type");
  }
  return type;
}

void put(std::byte* row, std::size_t offset, std::uint64_t value) {
  std::memcpy(row + offset, &value, sizeof value);
}

std::uint64_t get(const std::byte* row, std::size_t offset) {
  std::uint64_t value = 0;
  std::memcpy(&value, row + offset, sizeof value);
  return value;
}

// A fixed, NUL-padded string column's text.
std::string_view text(const std::byte* row, std::size_t offset, std::size_t width) {
  const auto* begin = reinterpret_cast<const char*>(row + offset);
  return {begin, static_cast<std::size_t>(std::find(begin, begin + width, '\0') - begin)};
}

// Names the columns the index should have had: version 2's seven, or those and `kind`.
std::string not_an_index(const std::string& what, const std::string& why, IndexColumns columns) {
  return what + " is not a blob index (a table of the columns name, dtype, ndim, shape, " +
         "packed, offset, size" + (columns == IndexColumns::kWithKind ? ", kind" : "") +
         "): " + why;
}

// The member `column` of a compound `type`, which must exist.
Handle member(hid_t type, Column column, IndexColumns columns, const std::string& what) {
  const int at = H5Tget_member_index(type, kColumns[column]);
  if (at < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw CorruptCheckpoint(
        not_an_index(what, std::string("no column '") + kColumns[column] + "'", columns));
  }
  return Handle(H5Tget_member_type(type, static_cast<unsigned>(at)), "get column of " + what);
}

bool is_uint(hid_t type, std::size_t size) {
  return H5Tget_class(type) == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE &&
         H5Tget_size(type) == size;
}

// A fixed NUL-padded string column of at most `max_width` bytes: its width.
std::size_t string_width(hid_t type, Column column, std::size_t max_width, IndexColumns columns,
                         const std::string& what) {
  const bool fixed = H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) == 0 &&
                     H5Tget_strpad(type) == H5T_STR_NULLPAD;
  const auto width = fixed ? H5Tget_size(type) : 0;
  if (width < 1 || width > max_width) {
    throw CorruptCheckpoint(not_an_index(what,
                                         std::string("its column '") + kColumns[column] +
                                             "' is not a NUL-padded string of 1 to " +
                                             std::to_string(max_width) + " bytes",
                                         columns));
  }
  return width;
}

// The table's row shape, from its type: exactly the columns write_blob_index writes, of its
// types (strings: any width up to the limits, NUL-padded; the shape: 1 to kMaxDimensions).
RowShape check_columns(hid_t dataset, IndexColumns columns, const std::string& what) {
  Handle type(H5Dget_type(dataset), "get type of " + what);
  if (H5Tget_class(type.get()) != H5T_COMPOUND ||
      H5Tget_nmembers(type.get()) != static_cast<int>(column_count(columns))) {
    throw CorruptCheckpoint(not_an_index(what, "not a table of exactly these columns", columns));
  }
  RowShape shape;
  shape.columns = columns;
  shape.name_width = string_width(member(type.get(), kName, columns, what).get(), kName,
                                  kMaxNameLength, columns, what);
  shape.dtype_width = string_width(member(type.get(), kDType, columns, what).get(), kDType,
                                   kDTypeWidth, columns, what);
  const auto dims = member(type.get(), kShape, columns, what);
  hsize_t width = 0;
  const bool shape_ok = H5Tget_class(dims.get()) == H5T_ARRAY &&
                        H5Tget_array_ndims(dims.get()) == 1 &&
                        H5Tget_array_dims2(dims.get(), &width) == 1 && width >= 1 &&
                        width <= static_cast<hsize_t>(h5::kMaxDimensions) &&
                        is_uint(Handle(H5Tget_super(dims.get()), "get shape base type").get(), 8);
  if (!shape_ok) {
    throw CorruptCheckpoint(not_an_index(what,
                                         "its column 'shape' is not an array of 1 to " +
                                             std::to_string(h5::kMaxDimensions) + " uint64",
                                         columns));
  }
  shape.shape_width = static_cast<std::size_t>(width);
  std::vector<Column> integers = {kNdim, kPacked, kOffset, kSize};
  if (columns == IndexColumns::kWithKind) {
    integers.push_back(kKind);
  }
  for (auto column : integers) {
    if (!is_uint(member(type.get(), column, columns, what).get(),
                 column == kOffset || column == kSize ? 8 : 1)) {
      throw CorruptCheckpoint(not_an_index(what,
                                           std::string("its column '") + kColumns[column] +
                                               "' is not an unsigned integer of its size",
                                           columns));
    }
  }
  shape.place_columns();
  return shape;
}

IndexRow row_from_bytes(const std::byte* row, const RowShape& shape, const std::string& what) {
  IndexRow out;
  out.name = text(row, shape.offsets[kName], shape.name_width);
  read_or_corrupt(
      [&] {
        validate_name(out.name, "blob name");
        out.dtype = parse_dtype(text(row, shape.offsets[kDType], shape.dtype_width));
      },
      what + ": ");
  const auto ndim = static_cast<std::size_t>(row[shape.offsets[kNdim]]);
  if (ndim > shape.shape_width) {
    throw CorruptCheckpoint(what + ": blob '" + out.name + "' has " + std::to_string(ndim) +
                            " dimensions in a shape column of " +
                            std::to_string(shape.shape_width));
  }
  out.shape.resize(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    out.shape[i] = get(row, shape.offsets[kShape] + 8 * i);
  }
  out.packed = row[shape.offsets[kPacked]] != std::byte{0};
  out.offset = get(row, shape.offsets[kOffset]);
  out.size = get(row, shape.offsets[kSize]);
  if (shape.columns == IndexColumns::kWithKind) {
    const auto kind = static_cast<std::uint8_t>(row[shape.offsets[kKind]]);
    if (kind > static_cast<std::uint8_t>(StorageKind::kRagged)) {
      throw CorruptCheckpoint(what + ": blob '" + out.name + "' is of no known kind (" +
                              std::to_string(kind) + ")");
    }
    out.kind = static_cast<StorageKind>(kind);
  }
  return out;
}

void refuse_duplicates(const std::vector<IndexRow>& rows, const std::string& what) {
  const auto by_name = [](const IndexRow& a, const IndexRow& b) { return a.name < b.name; };
  // Rows in strictly increasing name order (a workspace's order) have no duplicate: one pass.
  if (std::adjacent_find(rows.begin(), rows.end(), [&](const IndexRow& a, const IndexRow& b) {
        return !by_name(a, b);
      }) == rows.end()) {
    return;
  }
  std::vector<std::string_view> names;
  names.reserve(rows.size());
  for (const auto& row : rows) {
    names.emplace_back(row.name);
  }
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice != names.end()) {
    throw CorruptCheckpoint(what + " lists blob '" + std::string(*twice) + "' twice");
  }
}

}  // namespace

std::uint64_t blob_index_bytes(const std::vector<BlobRecord>& records) {
  RowShape shape;
  for (const auto& record : records) {
    shape.widen_to(record.name, record.shape);
  }
  shape.place_columns();
  return shape.size * records.size();
}

void write_blob_index(hid_t group, const char* name, std::size_t count,
                      const std::function<IndexRowView(std::size_t)>& row, IndexColumns columns) {
  const std::string what = std::string("blob index ") + name;
  RowShape shape;
  shape.columns = columns;
  for (std::size_t i = 0; i < count; ++i) {
    const auto view = row(i);
    shape.widen_to(view.name, view.shape);
  }
  shape.place_columns();
  std::vector<std::byte> bytes(count * shape.size);
  for (std::size_t i = 0; i < count; ++i) {
    const auto view = row(i);
    auto* at = bytes.data() + i * shape.size;
    std::memcpy(at + shape.offsets[kName], view.name.data(), view.name.size());
    const auto dtype = dtype_name(view.dtype);
    std::memcpy(at + shape.offsets[kDType], dtype.data(), dtype.size());
    at[shape.offsets[kNdim]] = static_cast<std::byte>(view.shape.size());
    if (!view.shape.empty()) {  // a scalar's: memcpy must not get its null data()
      std::memcpy(at + shape.offsets[kShape], view.shape.data(), 8 * view.shape.size());
    }
    at[shape.offsets[kPacked]] = static_cast<std::byte>(view.packed ? 1 : 0);
    put(at, shape.offsets[kOffset], view.offset);
    put(at, shape.offsets[kSize], view.size);
    if (columns == IndexColumns::kWithKind) {
      at[shape.offsets[kKind]] = static_cast<std::byte>(view.kind);
    }
  }
  auto name_type = string_type(shape.name_width);
  auto dtype_type = string_type(shape.dtype_width);
  // The bytes are the file's: written without conversion.
  auto type = row_type(shape, name_type.get(), dtype_type.get(), H5T_STD_U64LE, H5T_STD_U8LE);
  hsize_t rows = count;
  Handle space(H5Screate_simple(1, &rows, nullptr), "create space of " + what);
  const auto dcpl = h5::untimed_creation_list(H5P_DATASET_CREATE, "dataset creation list");
  Handle dataset(
      H5Dcreate2(group, name, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      "create " + what);
  if (count > 0) {
    h5::check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
              "write " + what);
  }
}

std::vector<IndexRow> read_blob_index(hid_t dataset, const std::string& what,
                                      std::uint64_t file_bytes, IndexColumns columns) {
  h5::check_storage(dataset, what);
  const auto shape = check_columns(dataset, columns, what);
  const auto dimensions = h5::shape_of(dataset, what);
  if (dimensions.size() != 1) {
    throw CorruptCheckpoint(what + " is not a one-dimensional table");
  }
  // Every row takes more than 8 bytes of the file: nothing a crafted count says makes us
  // allocate more than the file justifies.
  if (dimensions[0] > file_bytes / 8) {
    throw CorruptCheckpoint(what + " claims " + std::to_string(dimensions[0]) +
                            " rows, more than the file can hold");
  }
  std::vector<IndexRow> rows;
  if (dimensions[0] == 0) {
    return rows;
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(dimensions[0]) * shape.size);
  // Strings as the file has them (HDF5 does not convert between character sets); integers
  // native. For the files epochrun writes, this is the file's own type: no conversion.
  Handle file_type(H5Dget_type(dataset), "get type of " + what);
  auto type = row_type(shape, member(file_type.get(), kName, columns, what).get(),
                       member(file_type.get(), kDType, columns, what).get(), H5T_NATIVE_UINT64,
                       H5T_NATIVE_UINT8);
  h5::check(H5Dread(dataset, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
            "read " + what);
  rows.reserve(static_cast<std::size_t>(dimensions[0]));
  for (std::size_t at = 0; at < bytes.size(); at += shape.size) {
    rows.push_back(row_from_bytes(bytes.data() + at, shape, what));
  }
  refuse_duplicates(rows, what);
  return rows;
}

std::vector<std::byte> checksum_table(const std::vector<std::uint64_t>& sums) {
  std::vector<std::byte> table(8 * sums.size());
  std::memcpy(table.data(), sums.data(), table.size());
  return table;
}

}  // namespace epochrun
