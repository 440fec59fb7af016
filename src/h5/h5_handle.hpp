// RAII for HDF5 identifiers, and HDF5 failures as exceptions carrying HDF5's own message.
// Internal to the library: no hid_t leaves src/.
#pragma once

#include <hdf5.h>

#include <string>
#include <string_view>

namespace epochrun::h5 {

// The current HDF5 error stack as one line, and clears it.
std::string take_error_stack();

// Throws Hdf5Error("<context>: <HDF5 stack>") when status < 0.
void check(herr_t status, std::string_view context);

// An owned HDF5 identifier of any kind; closed with the right H5?close on destruction.
class Handle {
 public:
  Handle() = default;
  // Takes ownership of `id`; throws Hdf5Error with `context` when id < 0.
  Handle(hid_t id, std::string_view context);
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports a failure (closing a file flushes it, which can fail).
  void close(std::string_view context);

 private:
  void reset() noexcept;
  hid_t id_ = H5I_INVALID_HID;
};

// Opens the HDF5 file at `path` read-only with the access list `fapl` (Hdf5Error naming `what`
// when it cannot), counted as a call of H5Fopen when this thread records step times
// (step_times.hpp): `epochrun bench --scale` shows which steps open a file with HDF5.
Handle open_file_read_only(const std::string& path, hid_t fapl, std::string_view what);

}  // namespace epochrun::h5
