#include "epochrun/blob_file.hpp"

#include <unistd.h>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "h5_attributes.hpp"
#include "h5_library.hpp"
#include "h5_types.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

using h5::Handle;

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

}  // namespace

void write_blob_file(const std::filesystem::path& file, const std::map<std::string, Blob>& blobs,
                     const std::map<std::string, std::string>& attributes) {
  h5::set_up_library();
  const auto temporary = temporary_sibling(file);
  try {
    // Created with its final mode before HDF5 writes into it: never writable by others.
    auto fd = create_new_file(temporary);
    {
      Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
      h5::check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
      Handle h5file(
          H5Fcreate(descriptor_path(fd.get()).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
          "create " + temporary.string());
      for (const auto& [name, value] : attributes) {
        h5::write_string_attribute(h5file.get(), name, value);
      }
      for (const auto& [name, blob] : blobs) {
        validate_name(name, "blob name");
        auto type = h5::file_type_for(blob.dtype());
        auto memory_type = h5::memory_type_for(blob.dtype());
        auto space = h5::dataspace_for(blob.shape());
        Handle dataset(H5Dcreate2(h5file.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                  H5P_DEFAULT, H5P_DEFAULT),
                       "create dataset " + name);
        h5::mark_dtype(dataset.get(), blob.dtype());
        if (blob.byte_size() > 0) {
          h5::check(H5Dwrite(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             blob.raw().data()),
                    "write dataset " + name);
        }
      }
      h5file.close("close " + temporary.string());
    }
    sync_file(fd.get(), temporary.string());
    fd.close(temporary.string());
    rename_durably(temporary, file);
  } catch (const std::exception& error) {
    ::unlink(temporary.c_str());
    throw Error("write " + file.string() + ": " + error.what());
  }
}

std::map<std::string, Blob> read_blob_file(const std::filesystem::path& file) {
  h5::set_up_library();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  h5::check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  Handle h5file(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), "open " + file.string());
  std::vector<std::string> names;
  h5::check(H5Literate(h5file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names),
            "list " + file.string());
  std::map<std::string, Blob> blobs;
  for (const auto& name : names) {
    Handle dataset(H5Dopen2(h5file.get(), name.c_str(), H5P_DEFAULT), "open dataset " + name);
    Handle space(H5Dget_space(dataset.get()), "get space of " + name);
    int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    Blob blob(h5::dtype_of(dataset.get(), "dataset " + name), Shape(dims.begin(), dims.end()));
    auto memory_type = h5::memory_type_for(blob.dtype());
    if (blob.byte_size() > 0) {
      h5::check(H5Dread(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                        blob.raw().data()),
                "read dataset " + name);
    }
    blobs.emplace(name, std::move(blob));
  }
  return blobs;
}

}  // namespace epochrun
