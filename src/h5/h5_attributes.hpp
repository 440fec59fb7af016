// Reading and writing the attributes a checkpoint carries. Readers treat the file as
// untrusted: wrong types, shapes or sizes become CorruptCheckpoint errors, never crashes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace epochrun::h5 {

// Writers. Every file they write into is open in one process with serial HDF5 (a
// checkpoint's layout by rank 0 alone, a blob file by its one writer): no other rank takes
// part in the write.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_int_attribute(hid_t object, const std::string& name, std::int64_t value);
void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values);
// A table of unsigned integers (uint64, `rows` x `columns`, row-major `values`).
void write_uint_table_attribute(hid_t object, const std::string& name, std::uint64_t rows,
                                std::uint64_t columns, const std::vector<std::uint64_t>& values);

// Readers; `max_bytes` bounds what a crafted file can make us allocate.
std::string read_string_attribute(hid_t object, const std::string& name, std::uint64_t max_bytes);
std::int64_t read_int_attribute(hid_t object, const std::string& name);
std::uint64_t read_uint_attribute(hid_t object, const std::string& name);
std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name,
                                                    std::uint64_t max_bytes);
// A table write_uint_table_attribute wrote, of exactly `rows` x `columns` unsigned integers
// (CorruptCheckpoint for any other shape or type), row-major.
std::vector<std::uint64_t> read_uint_table_attribute(hid_t object, const std::string& name,
                                                     std::uint64_t rows, std::uint64_t columns);

}  // namespace epochrun::h5
