#include "h5_handle.hpp"

#include "epochrun/errors.hpp"
#include "step_times.hpp"

namespace epochrun::h5 {
namespace {

herr_t collect_error(unsigned depth, const H5E_error2_t* error, void* text_ptr) {
  auto& text = *static_cast<std::string*>(text_ptr);
  if (error->desc != nullptr && error->desc[0] != '\0') {
    if (depth > 0) {
      text += "; ";
    }
    text += std::string(error->func_name ? error->func_name : "?") + ": " + error->desc;
  }
  return 0;
}

herr_t close_any(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE:
      return H5Fclose(id);
    case H5I_GROUP:
      return H5Gclose(id);
    case H5I_DATASET:
      return H5Dclose(id);
    case H5I_DATASPACE:
      return H5Sclose(id);
    case H5I_DATATYPE:
      return H5Tclose(id);
    case H5I_ATTR:
      return H5Aclose(id);
    case H5I_GENPROP_LST:
      return H5Pclose(id);
    default:
      return H5Idec_ref(id);
  }
}

}  // namespace

std::string take_error_stack() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &text);
  H5Eclear2(H5E_DEFAULT);
  // HDF5's descriptions can hold newlines; our errors are one line.
  for (auto& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text.empty() ? "no HDF5 error detail" : text;
}

void check(herr_t status, std::string_view context) {
  if (status < 0) {
    throw Hdf5Error(std::string(context) + ": " + take_error_stack());
  }
}

Handle::Handle(hid_t id, std::string_view context) : id_(id) {
  if (id < 0) {
    throw Hdf5Error(std::string(context) + ": " + take_error_stack());
  }
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::close(std::string_view context) {
  hid_t id = id_;
  id_ = H5I_INVALID_HID;
  if (id >= 0) {
    check(close_any(id), context);
  }
}

void Handle::reset() noexcept {
  if (id_ >= 0) {
    close_any(id_);
    H5Eclear2(H5E_DEFAULT);
    id_ = H5I_INVALID_HID;
  }
}

Handle open_file_read_only(const std::string& path, hid_t fapl, std::string_view what) {
  step_times::count_call("H5Fopen");
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), what);
}

}  // namespace epochrun::h5
