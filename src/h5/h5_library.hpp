// HDF5's process-wide settings, as the library uses HDF5.
#pragma once

namespace epochrun::h5 {

// Once per process, before the first HDF5 call of any path: turns off HDF5's printing of error
// stacks to stderr (we report them in exceptions), and lets HDF5's free lists keep a file's
// metadata cache for the next file (see h5_library.cpp). Safe to call many times.
void set_up_library();

}  // namespace epochrun::h5
