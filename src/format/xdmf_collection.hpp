// An XDMF file (XDMF 2, which ParaView's and VisIt's readers open) describing the global arrays
// of committed checkpoints as a temporal collection: one time step per epoch, each array a
// field on a uniform grid of its shape, its values read from the checkpoint file's
// /arrays/<name> dataset itself (no copy). Text only: the caller writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epochrun/checkpoint_format.hpp"

namespace epochrun {

// One committed epoch: its checkpoint file as the XDMF file names it (relative to the XDMF
// file's directory, or absolute) and its global arrays.
struct XdmfEpoch {
  std::int64_t epoch = 0;
  std::string file;
  std::vector<GlobalArrayRecord> arrays;
};

// The XDMF text of `epochs` (ascending). The arrays of one epoch that share a shape are fields
// of one uniform grid; arrays of other shapes are grids of their own in a spatial collection
// for that time step. An array of more than 3 dimensions has no uniform grid in XDMF and is
// left out.
std::string xdmf_text(const std::vector<XdmfEpoch>& epochs);

}  // namespace epochrun
