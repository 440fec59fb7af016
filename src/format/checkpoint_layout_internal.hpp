// What the checkpoint layout's writer and readers share. Internal to checkpoint_layout.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "epochrun/blob.hpp"

#include "h5_handle.hpp"
#include "integrity_header.hpp"

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

// Creates (truncates) the checkpoint file open as `fd` with serial HDF5: a user block of
// `user_block_size` bytes left for the integrity header, datasets of kAlignDatasetsFrom bytes
// and more aligned to a page.
h5::Handle create_checkpoint_file(int fd, std::uint64_t user_block_size);

// Whether two sorted extent lists are the same.
bool same_extents(const std::vector<DataExtent>& a, const std::vector<DataExtent>& b);
// CorruptCheckpoint unless the data extents a reader `found` (sorted) are exactly those the
// integrity header recorded at commit: no blob reads metadata, another blob's bytes or past
// the end.
void check_extents_match(const std::vector<DataExtent>& found,
                         const std::vector<DataExtent>& committed);

// "/nodes/<node>/<blob>".
std::string dataset_path(const std::string& node, const std::string& blob);

}  // namespace epochrun
