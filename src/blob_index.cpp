#include "blob_index.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "h5_handle.hpp"
#include "h5_objects.hpp"

namespace epochrun {
namespace {

using h5::Handle;

// One row as HDF5 reads and writes it in memory.
struct MemoryRow {
  char* name;
  char* dtype;
  hvl_t shape;  // of std::uint64_t
  std::uint8_t packed;
  std::uint64_t offset;
  std::uint64_t size;
};

constexpr std::array<const char*, 6> kColumns = {"name",   "dtype",  "shape",
                                                 "packed", "offset", "size"};

Handle string_type() {
  Handle type(H5Tcopy(H5T_C_S1), "copy string type");
  h5::check(H5Tset_size(type.get(), H5T_VARIABLE), "set string size");
  h5::check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "set string charset");
  return type;
}

// The compound type with the columns in order, of `uint64` and `uint8` integers, either
// packed (the file's) or at MemoryRow's offsets.
Handle row_type(hid_t uint64, hid_t uint8, bool in_memory) {
  auto string = string_type();
  Handle shape(H5Tvlen_create(uint64), "create shape type");
  const std::array<hid_t, 6> members = {string.get(), string.get(), shape.get(),
                                        uint8,        uint64,       uint64};
  const std::array<std::size_t, 6> memory_offsets = {
      offsetof(MemoryRow, name),   offsetof(MemoryRow, dtype),  offsetof(MemoryRow, shape),
      offsetof(MemoryRow, packed), offsetof(MemoryRow, offset), offsetof(MemoryRow, size)};
  std::size_t packed_size = 0;
  for (auto member : members) {
    packed_size += H5Tget_size(member);
  }
  Handle type(H5Tcreate(H5T_COMPOUND, in_memory ? sizeof(MemoryRow) : packed_size),
              "create index row type");
  std::size_t at = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    h5::check(H5Tinsert(type.get(), kColumns[i], in_memory ? memory_offsets[i] : at, members[i]),
              "build index row type");
    at += H5Tget_size(members[i]);
  }
  return type;
}

// What H5Dread allocated for the rows' strings and shapes, given back on every path.
class ReclaimRows {
 public:
  ReclaimRows(hid_t type, hid_t space, std::vector<MemoryRow>& rows)
      : type_(type), space_(space), rows_(rows) {}
  ~ReclaimRows() { H5Dvlen_reclaim(type_, space_, H5P_DEFAULT, rows_.data()); }
  ReclaimRows(const ReclaimRows&) = delete;
  ReclaimRows& operator=(const ReclaimRows&) = delete;

 private:
  hid_t type_;
  hid_t space_;
  std::vector<MemoryRow>& rows_;
};

void check_columns(hid_t dataset, const std::string& what) {
  Handle type(H5Dget_type(dataset), "get type of " + what);
  if (H5Tget_class(type.get()) != H5T_COMPOUND ||
      H5Tget_nmembers(type.get()) != static_cast<int>(kColumns.size())) {
    throw CorruptCheckpoint(what + " is not a blob index (a table of the columns " +
                            "name, dtype, shape, packed, offset, size)");
  }
  for (const auto* column : kColumns) {
    if (H5Tget_member_index(type.get(), column) < 0) {
      H5Eclear2(H5E_DEFAULT);
      throw CorruptCheckpoint(what + " has no column '" + column + "'");
    }
  }
}

IndexRow row_from_memory(const MemoryRow& row, const std::string& what) {
  IndexRow out;
  out.name = row.name != nullptr ? row.name : "";
  try {
    validate_name(out.name, "blob name");
    out.dtype = parse_dtype(row.dtype != nullptr ? row.dtype : "");
  } catch (const UsageError& error) {
    throw CorruptCheckpoint(what + ": " + error.what());
  }
  if (row.shape.len > static_cast<std::size_t>(h5::kMaxDimensions)) {
    throw CorruptCheckpoint(what + ": blob '" + out.name + "' has more than " +
                            std::to_string(h5::kMaxDimensions) + " dimensions");
  }
  const auto* dims = static_cast<const std::uint64_t*>(row.shape.p);
  out.shape.assign(dims, dims + row.shape.len);
  out.packed = row.packed != 0;
  out.offset = row.offset;
  out.size = row.size;
  return out;
}

}  // namespace

void write_blob_index(hid_t group, const char* name, const std::vector<IndexRow>& rows) {
  const std::string what = std::string("blob index ") + name;
  auto file_type = row_type(H5T_STD_U64LE, H5T_STD_U8LE, false);
  auto memory_type = row_type(H5T_NATIVE_UINT64, H5T_NATIVE_UINT8, true);
  hsize_t count = rows.size();
  Handle space(H5Screate_simple(1, &count, nullptr), "create space of " + what);
  Handle dataset(
      H5Dcreate2(group, name, file_type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      "create " + what);
  if (rows.empty()) {
    return;
  }
  std::vector<std::string> dtypes;
  dtypes.reserve(rows.size());
  std::vector<MemoryRow> memory(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    dtypes.emplace_back(dtype_name(row.dtype));
    // HDF5 only reads through these pointers on a write.
    memory[i] = MemoryRow{const_cast<char*>(row.name.c_str()),
                          const_cast<char*>(dtypes.back().c_str()),
                          hvl_t{row.shape.size(), const_cast<std::uint64_t*>(row.shape.data())},
                          static_cast<std::uint8_t>(row.packed ? 1 : 0),
                          row.offset,
                          row.size};
  }
  h5::check(
      H5Dwrite(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, memory.data()),
      "write " + what);
}

std::vector<IndexRow> read_blob_index(hid_t dataset, const std::string& what,
                                      std::uint64_t file_bytes) {
  h5::check_storage(dataset, what);
  check_columns(dataset, what);
  const auto shape = h5::shape_of(dataset, what);
  if (shape.size() != 1) {
    throw CorruptCheckpoint(what + " is not a one-dimensional table");
  }
  // Every row takes more than 8 bytes of the file: nothing a crafted count says makes us
  // allocate more than the file justifies.
  if (shape[0] > file_bytes / 8) {
    throw CorruptCheckpoint(what + " claims " + std::to_string(shape[0]) +
                            " rows, more than the file can hold");
  }
  std::vector<MemoryRow> memory(static_cast<std::size_t>(shape[0]));
  std::vector<IndexRow> rows;
  if (memory.empty()) {
    return rows;
  }
  auto memory_type = row_type(H5T_NATIVE_UINT64, H5T_NATIVE_UINT8, true);
  Handle space(H5Dget_space(dataset), "get space of " + what);
  ReclaimRows reclaim(memory_type.get(), space.get(), memory);  // also after a partial read
  h5::check(H5Dread(dataset, memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, memory.data()),
            "read " + what);
  rows.reserve(memory.size());
  std::set<std::string_view> names;
  for (const auto& row : memory) {
    rows.push_back(row_from_memory(row, what));
    if (!names.insert(rows.back().name).second) {
      throw CorruptCheckpoint(what + " lists blob '" + rows.back().name + "' twice");
    }
  }
  return rows;
}

}  // namespace epochrun
