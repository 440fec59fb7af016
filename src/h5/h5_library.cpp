#include "h5_library.hpp"

#include <hdf5.h>

#include <mutex>

namespace epochrun::h5 {

namespace {

// HDF5 1.10 allocates each open file's metadata cache (H5C_t, 528 KiB: its hash table) from
// its free list of regular blocks, whose default limit of 64 KiB a list is below one cache: so
// every closed file gave the block back to malloc, which unmapped it, and every new file mapped
// and faulted in 129 fresh pages. At 1 MiB a list the block stays for the next file. Measured
// in the lay-out of a 3-rank checkpoint (one process, medians of 15 rounds): 2.1 to 1.3 ms.
// The other limits are HDF5's defaults; the global one holds four lists' worth.
constexpr int kRegularGlobal = 4 << 20;
constexpr int kRegularList = 1 << 20;
constexpr int kArrayGlobal = 4 << 20;
constexpr int kArrayList = 256 << 10;
constexpr int kBlockGlobal = 16 << 20;
constexpr int kBlockList = 1 << 20;

}  // namespace

void set_up_library() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // Only a matter of speed: a failure leaves HDF5's defaults.
    (void)H5set_free_list_limits(kRegularGlobal, kRegularList, kArrayGlobal, kArrayList,
                                 kBlockGlobal, kBlockList);
  });
}

}  // namespace epochrun::h5
