// The creation property lists of the objects epochrun writes into a checkpoint.
#pragma once

#include <hdf5.h>

#include <string>

#include "h5_handle.hpp"

namespace epochrun::h5 {

// A creation list of `list_class` (H5P_FILE_CREATE, H5P_GROUP_CREATE or H5P_DATASET_CREATE)
// whose objects carry no times. HDF5 stamps every object header with the time it was made by
// default: two saves of the same state would then differ wherever a second passed between them,
// and the bytes a checkpoint holds would depend on when it was written, not only on what.
Handle untimed_creation_list(hid_t list_class, const std::string& what);

}  // namespace epochrun::h5
