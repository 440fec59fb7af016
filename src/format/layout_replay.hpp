// A save's lay-out without HDF5 when only the epoch changed: the metadata bytes HDF5 wrote for
// an earlier file of the same description, with the root's epoch attribute and its object header's
// checksum rewritten. HDF5 costs about 1.2 ms a file whatever its size (the metadata cache,
// property lists, one object header at a time), which at 3 ranks is a third of a small save.
// Internal to the library.
#pragma once

#include <functional>

#include "checkpoint_layout_v3.hpp"

namespace epochrun {

// Lays out `description` in the empty file open read-write as `fd`, as
// lay_out_checkpoint_file_v3 does, and byte for byte the same file. It replays a lay-out this
// process made (of the last four descriptions) when `description` differs from that one's in
// its epoch alone, once two HDF5 lay-outs of that description have shown which bytes the epoch
// changes and the replay of the first rebuilt the second exactly; otherwise it lays the file
// out through HDF5 and remembers its bytes. `created` runs once, as lay_out_checkpoint_file_v3
// runs it (a replay runs it before writing). Throws Hdf5Error or Error.
LayoutV3 lay_out_or_replay_v3(int fd, const FileDescription& description,
                              const std::function<void()>& created);

}  // namespace epochrun
