// What the checkpoint layout's writer and readers share. Internal to checkpoint_layout.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "epochrun/blob.hpp"

#include "h5_handle.hpp"

namespace epochrun {

// The file access list every checkpoint file is created and opened with.
h5::Handle checkpoint_file_access();

// Writers' helpers: a group; the creation list of every dataset (contiguous, allocated at
// creation so that its offset is known before any byte is written, never filled: that would
// write every byte twice); a dataset created with it and the offset of its bytes (0 when it
// holds none).
h5::Handle create_group(hid_t parent, const std::string& name);
h5::Handle dataset_creation();
std::pair<h5::Handle, std::uint64_t> create_dataset(hid_t parent, const std::string& name,
                                                    const h5::Handle& type, const Shape& shape,
                                                    hid_t dcpl, const std::string& what);

// "/nodes/<node>/<blob>".
std::string dataset_path(const std::string& node, const std::string& blob);

}  // namespace epochrun
