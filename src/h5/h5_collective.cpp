#include "h5_collective.hpp"

#include <hdf5.h>

#include <vector>

#include "epochrun/errors.hpp"
#include "h5_creation.hpp"
#include "h5_handle.hpp"
#include "h5_library.hpp"
#include "h5_objects.hpp"
#include "h5_types.hpp"

namespace epochrun::h5 {

namespace {

// The file access list of the MPI-IO driver over `comm` with `hints`.
Handle mpio_file_access(MPI_Comm comm, const std::map<std::string, std::string>& hints) {
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  for (const auto& [key, value] : hints) {
    MPI_Info_set(info, key.c_str(), value.c_str());
  }
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  const herr_t status = H5Pset_fapl_mpio(fapl.get(), comm, info);
  MPI_Info_free(&info);  // HDF5 keeps its own copy
  check(status, "select the MPI-IO file driver");
  check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  return fapl;
}

std::string io_mode_name(H5D_mpio_actual_io_mode_t mode) {
  switch (mode) {
    case H5D_MPIO_CONTIGUOUS_COLLECTIVE:
      return "contiguous collective";
    case H5D_MPIO_CHUNK_COLLECTIVE:
      return "chunk collective";
    case H5D_MPIO_CHUNK_MIXED:
      return "chunk mixed";
    case H5D_MPIO_CHUNK_INDEPENDENT:
    case H5D_MPIO_NO_COLLECTIVE:
      break;
  }
  return "no collective";
}

// This rank's block as a selection of the file's dataspace, and the memory dataspace of its
// elements (an empty block selects nothing in both).
struct Selection {
  Handle file_space;
  Handle memory_space;
};

Selection select_block(hid_t dataset, const Block& block) {
  Selection selection{Handle(H5Dget_space(dataset), "get the dataspace"), Handle()};
  const std::vector<hsize_t> start(block.start.begin(), block.start.end());
  const std::vector<hsize_t> count(block.count.begin(), block.count.end());
  if (H5Sget_simple_extent_ndims(selection.file_space.get()) !=
      static_cast<int>(block.start.size())) {
    throw UsageError("block " + block_to_string(block) + " of another rank than the dataset");
  }
  const hsize_t elements = block.element_count();
  selection.memory_space = Handle(H5Screate_simple(1, &elements, nullptr), "memory dataspace");
  if (elements == 0) {
    check(H5Sselect_none(selection.file_space.get()), "select nothing");
    check(H5Sselect_none(selection.memory_space.get()), "select nothing");
  } else {
    check(H5Sselect_hyperslab(selection.file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                              count.data(), nullptr),
          "select the block");
  }
  return selection;
}

// Opens `file` with the MPI-IO driver, transfers this rank's block collectively with `move`
// (H5Dwrite or H5Dread), and reports how HDF5 carried it.
template <typename Move>
CollectiveTransfer transfer(MPI_Comm comm, const std::filesystem::path& file, unsigned access,
                            const std::string& dataset_path, const Block& block,
                            const std::map<std::string, std::string>& hints, Move move) {
  const auto fapl = mpio_file_access(comm, hints);
  Handle h5file(H5Fopen(file.c_str(), access, fapl.get()), "open " + file.string());
  Handle dataset(H5Dopen2(h5file.get(), dataset_path.c_str(), H5P_DEFAULT), "open " + dataset_path);
  const auto selection = select_block(dataset.get(), block);
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), "create transfer list");
  check(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), "ask for a collective transfer");
  move(dataset.get(), selection.memory_space.get(), selection.file_space.get(), dxpl.get());
  H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
  check(H5Pget_mpio_actual_io_mode(dxpl.get(), &mode), "get the actual I/O mode");
  CollectiveTransfer result{io_mode_name(mode)};
  check(H5Pget_mpio_no_collective_cause(dxpl.get(), &result.local_cause, &result.global_cause),
        "get the causes of independent I/O");
  dataset.close("close " + dataset_path);
  h5file.close("close " + file.string());
  return result;
}

}  // namespace

std::uint64_t create_array_file(const std::filesystem::path& file, const std::string& dataset,
                                DType dtype, const Shape& global_shape,
                                std::uint64_t user_block_bytes) {
  set_up_library();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  // As a checkpoint's large datasets: page-aligned (relative to the user block), so that no
  // writer shares a page with the metadata.
  check(H5Pset_alignment(fapl.get(), 1 << 20, 4096), "set the alignment");
  const auto fcpl = untimed_creation_list(H5P_FILE_CREATE, "file creation list");
  if (user_block_bytes > 0) {
    check(H5Pset_userblock(fcpl.get(), user_block_bytes), "reserve the user block");
  }
  Handle h5file(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
                "create " + file.string());
  Handle links(H5Pcreate(H5P_LINK_CREATE), "create link creation list");
  check(H5Pset_create_intermediate_group(links.get(), 1), "create intermediate groups");
  const auto dcpl = untimed_creation_list(H5P_DATASET_CREATE, "dataset creation list");
  check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "contiguous layout");
  check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "allocate at creation");
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "disable fill values");
  const auto type = file_type_for(dtype);
  const auto space = dataspace_for(global_shape);
  Handle created(H5Dcreate2(h5file.get(), dataset.c_str(), type.get(), space.get(), links.get(),
                            dcpl.get(), H5P_DEFAULT),
                 "create " + dataset);
  // Contiguous and allocated at creation: the offset is final (and counts the user block).
  const auto offset = offset_of(created.get(), dataset);
  created.close("close " + dataset);
  h5file.close("close " + file.string());
  return offset;
}

CollectiveTransfer write_block_collectively(MPI_Comm comm, const std::filesystem::path& file,
                                            const std::string& dataset, DType dtype,
                                            const Block& block, std::span<const std::byte> data,
                                            const std::map<std::string, std::string>& hints) {
  const auto type = memory_type_for(dtype);
  return transfer(comm, file, H5F_ACC_RDWR, dataset, block, hints,
                  [&](hid_t set, hid_t memory, hid_t file_space, hid_t dxpl) {
                    check(H5Dwrite(set, type.get(), memory, file_space, dxpl, data.data()),
                          "write the block of " + dataset);
                  });
}

CollectiveTransfer read_block_collectively(MPI_Comm comm, const std::filesystem::path& file,
                                           const std::string& dataset, DType dtype,
                                           const Block& block, std::span<std::byte> data,
                                           const std::map<std::string, std::string>& hints) {
  const auto type = memory_type_for(dtype);
  return transfer(comm, file, H5F_ACC_RDONLY, dataset, block, hints,
                  [&](hid_t set, hid_t memory, hid_t file_space, hid_t dxpl) {
                    check(H5Dread(set, type.get(), memory, file_space, dxpl, data.data()),
                          "read the block of " + dataset);
                  });
}

}  // namespace epochrun::h5
