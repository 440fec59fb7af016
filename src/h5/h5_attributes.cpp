#include "h5_attributes.hpp"

#include <array>
#include <type_traits>

#include "epochrun/errors.hpp"
#include "h5_handle.hpp"

namespace epochrun::h5 {
namespace {

Handle variable_string_type() {
  Handle type(H5Tcopy(H5T_C_S1), "copy string type");
  check(H5Tset_size(type.get(), H5T_VARIABLE), "set string size");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "set string charset");
  return type;
}

void write_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type,
                     hid_t space, const void* data) {
  Handle attribute(H5Acreate2(object, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT),
                   "create attribute " + name);
  check(H5Awrite(attribute.get(), memory_type, data), "write attribute " + name);
}

Handle open_attribute(hid_t object, const std::string& name) {
  htri_t exists = H5Aexists(object, name.c_str());
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw CorruptCheckpoint("attribute '" + name + "' is missing");
  }
  return Handle(H5Aopen(object, name.c_str(), H5P_DEFAULT), "open attribute " + name);
}

// Number of elements of an attribute's dataspace: 1 for a scalar, the product for 1-d.
std::uint64_t attribute_elements(hid_t attribute, const std::string& name, bool allow_list) {
  Handle space(H5Aget_space(attribute), "get space of attribute " + name);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank == 0) {
    return 1;
  }
  if (rank != 1 || !allow_list) {
    throw CorruptCheckpoint("attribute '" + name + "' has an unexpected shape");
  }
  hsize_t extent = 0;
  H5Sget_simple_extent_dims(space.get(), &extent, nullptr);
  return extent;
}

void require_class(hid_t attribute, const std::string& name, H5T_class_t wanted) {
  Handle type(H5Aget_type(attribute), "get type of attribute " + name);
  if (H5Tget_class(type.get()) != wanted) {
    throw CorruptCheckpoint("attribute '" + name + "' has the wrong type");
  }
}

// Reads `count` strings, variable- or fixed-length, with at most `max_bytes` in total.
std::vector<std::string> read_strings(hid_t attribute, const std::string& name, std::uint64_t count,
                                      std::uint64_t max_bytes) {
  Handle file_type(H5Aget_type(attribute), "get type of attribute " + name);
  if (H5Tget_class(file_type.get()) != H5T_STRING) {
    throw CorruptCheckpoint("attribute '" + name + "' is not a string");
  }
  if (count > max_bytes) {
    throw CorruptCheckpoint("attribute '" + name + "' claims " + std::to_string(count) +
                            " strings, more than the file can hold");
  }
  std::vector<std::string> values;
  values.reserve(count);
  if (H5Tis_variable_str(file_type.get()) > 0) {
    // Same character set as stored: HDF5 has no conversion between ASCII and UTF-8 strings,
    // and other writers (HDF5's default, many tools) store ASCII.
    auto memory_type = variable_string_type();
    check(H5Tset_cset(memory_type.get(), H5Tget_cset(file_type.get())), "set string charset");
    std::vector<char*> pointers(count, nullptr);
    check(H5Aread(attribute, memory_type.get(), pointers.data()), "read attribute " + name);
    std::uint64_t total = 0;
    for (char* pointer : pointers) {
      std::string value = pointer ? pointer : "";
      total += value.size();
      values.push_back(std::move(value));
    }
    Handle space(H5Aget_space(attribute), "get space of attribute " + name);
    H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, pointers.data());
    if (total > max_bytes) {
      throw CorruptCheckpoint("attribute '" + name + "' is larger than the file");
    }
    return values;
  }
  std::size_t width = H5Tget_size(file_type.get());
  if (width == 0 || width * count > max_bytes) {
    throw CorruptCheckpoint("attribute '" + name + "' is larger than the file");
  }
  Handle memory_type(H5Tcopy(H5T_C_S1), "copy string type");
  check(H5Tset_size(memory_type.get(), width), "set string size");
  std::string buffer(width * count, '\0');
  check(H5Aread(attribute, memory_type.get(), buffer.data()), "read attribute " + name);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string value = buffer.substr(i * width, width);
    values.push_back(value.substr(0, value.find('\0')));
  }
  return values;
}

// A single integer, converted by HDF5 to `memory_type` (which range-checks it).
template <typename T>
T read_integer_attribute(hid_t object, const std::string& name, hid_t memory_type) {
  auto attribute = open_attribute(object, name);
  require_class(attribute.get(), name, H5T_INTEGER);
  if (attribute_elements(attribute.get(), name, false) != 1) {
    throw CorruptCheckpoint("attribute '" + name + "' is not a single integer");
  }
  // The format's integers are 64 bits of the sign it says: HDF5 would convert any other size
  // that holds the value, taking a file no epochrun wrote.
  Handle type(H5Aget_type(attribute.get()), "get type of attribute " + name);
  if (H5Tget_size(type.get()) != sizeof(T) ||
      (H5Tget_sign(type.get()) == H5T_SGN_NONE) != std::is_unsigned_v<T>) {
    throw CorruptCheckpoint("attribute '" + name + "' is not " +
                            (std::is_unsigned_v<T> ? "a uint64" : "an int64"));
  }
  T value = 0;
  check(H5Aread(attribute.get(), memory_type, &value), "read attribute " + name);
  return value;
}

}  // namespace

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  auto type = variable_string_type();
  Handle space(H5Screate(H5S_SCALAR), "create scalar space");
  const char* pointer = value.c_str();
  write_attribute(object, name, type.get(), type.get(), space.get(), &pointer);
}

void write_int_attribute(hid_t object, const std::string& name, std::int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), "create scalar space");
  write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), &value);
}

void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values) {
  auto type = variable_string_type();
  hsize_t extent = values.size();
  Handle space(H5Screate_simple(1, &extent, nullptr), "create list space");
  std::vector<const char*> pointers;
  pointers.reserve(values.size());
  for (const auto& value : values) {
    pointers.push_back(value.c_str());
  }
  write_attribute(object, name, type.get(), type.get(), space.get(), pointers.data());
}

void write_uint_table_attribute(hid_t object, const std::string& name, std::uint64_t rows,
                                std::uint64_t columns, const std::vector<std::uint64_t>& values) {
  if (values.size() != rows * columns) {
    throw Hdf5Error("attribute " + name + ": " + std::to_string(values.size()) +
                    " values for a table of " + std::to_string(rows) + " x " +
                    std::to_string(columns));
  }
  const std::array<hsize_t, 2> extent = {rows, columns};
  Handle space(H5Screate_simple(2, extent.data(), nullptr), "create table space");
  write_attribute(object, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, space.get(), values.data());
}

std::string read_string_attribute(hid_t object, const std::string& name, std::uint64_t max_bytes) {
  auto attribute = open_attribute(object, name);
  if (attribute_elements(attribute.get(), name, false) != 1) {
    throw CorruptCheckpoint("attribute '" + name + "' is not a single string");
  }
  return read_strings(attribute.get(), name, 1, max_bytes).front();
}

std::int64_t read_int_attribute(hid_t object, const std::string& name) {
  return read_integer_attribute<std::int64_t>(object, name, H5T_NATIVE_INT64);
}

std::uint64_t read_uint_attribute(hid_t object, const std::string& name) {
  return read_integer_attribute<std::uint64_t>(object, name, H5T_NATIVE_UINT64);
}

std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name,
                                                    std::uint64_t max_bytes) {
  auto attribute = open_attribute(object, name);
  auto count = attribute_elements(attribute.get(), name, true);
  return read_strings(attribute.get(), name, count, max_bytes);
}

std::vector<std::uint64_t> read_uint_table_attribute(hid_t object, const std::string& name,
                                                     std::uint64_t rows, std::uint64_t columns) {
  auto attribute = open_attribute(object, name);
  Handle type(H5Aget_type(attribute.get()), "get type of attribute " + name);
  Handle space(H5Aget_space(attribute.get()), "get space of attribute " + name);
  std::array<hsize_t, 2> extent = {0, 0};
  const bool fits = H5Tget_class(type.get()) == H5T_INTEGER &&
                    H5Tget_sign(type.get()) == H5T_SGN_NONE && H5Tget_size(type.get()) == 8 &&
                    H5Sget_simple_extent_ndims(space.get()) == 2 &&
                    H5Sget_simple_extent_dims(space.get(), extent.data(), nullptr) == 2 &&
                    extent[0] == rows && extent[1] == columns;
  if (!fits) {
    throw CorruptCheckpoint("attribute '" + name + "' is not a table of " + std::to_string(rows) +
                            " x " + std::to_string(columns) + " uint64");
  }
  std::vector<std::uint64_t> values(rows * columns);
  check(H5Aread(attribute.get(), H5T_NATIVE_UINT64, values.data()), "read attribute " + name);
  return values;
}

}  // namespace epochrun::h5
