#include "h5_creation.hpp"

namespace epochrun::h5 {

Handle untimed_creation_list(hid_t list_class, const std::string& what) {
  Handle list(H5Pcreate(list_class), "create " + what);
  check(H5Pset_obj_track_times(list.get(), false), "omit the times of " + what);
  return list;
}

}  // namespace epochrun::h5
