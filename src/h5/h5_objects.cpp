#include "h5_objects.hpp"

#include <vector>

#include "epochrun/errors.hpp"

namespace epochrun::h5 {

bool has_child(hid_t parent, const std::string& name) {
  const htri_t exists = H5Lexists(parent, name.c_str(), H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
  }
  return exists > 0;
}

Handle open_child(hid_t parent, const std::string& name, bool dataset, const std::string& what) {
  if (!has_child(parent, name)) {
    throw CorruptCheckpoint(what + " is missing");
  }
  H5L_info_t link{};
  check(H5Lget_info(parent, name.c_str(), &link, H5P_DEFAULT), "inspect " + what);
  if (link.type != H5L_TYPE_HARD) {
    throw CorruptCheckpoint(what + " is a soft or external link");
  }
  H5O_info_t object{};
  check(H5Oget_info_by_name(parent, name.c_str(), &object, H5P_DEFAULT), "inspect " + what);
  if (object.type != (dataset ? H5O_TYPE_DATASET : H5O_TYPE_GROUP)) {
    throw CorruptCheckpoint(what + " is not a " + (dataset ? "dataset" : "group"));
  }
  return dataset ? Handle(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what)
                 : Handle(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what);
}

void check_storage(hid_t dataset, const std::string& what) {
  Handle dcpl(H5Dget_create_plist(dataset), "get creation properties of " + what);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) {
    throw CorruptCheckpoint(what +
                            " is not stored contiguously (chunked, compact or virtual layout: "
                            "epochrun never writes those)");
  }
  if (H5Pget_external_count(dcpl.get()) != 0) {
    throw CorruptCheckpoint(what + " keeps its data in external files");
  }
  if (H5Pget_nfilters(dcpl.get()) != 0) {
    throw CorruptCheckpoint(what + " has filters (epochrun never writes those)");
  }
}

Shape shape_of(hid_t dataset, const std::string& what) {
  Handle space(H5Dget_space(dataset), "get space of " + what);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > kMaxDimensions || H5Sget_simple_extent_type(space.get()) == H5S_NULL) {
    throw CorruptCheckpoint(what + " has an unsupported shape");
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return Shape(dims.begin(), dims.end());
}

std::uint64_t offset_of(hid_t dataset, const std::string& what) {
  const haddr_t address = H5Dget_offset(dataset);
  if (address == HADDR_UNDEF) {
    H5Eclear2(H5E_DEFAULT);
    throw CorruptCheckpoint(what + " has no storage in the file");
  }
  return address;
}

}  // namespace epochrun::h5
