#include "inspect/global_array_entry.hpp"

#include <cstdio>
#include <optional>
#include <set>

#include "epochrun/global_array.hpp"

namespace epochrun::cli {
namespace {

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool blocks_of_grid(const GlobalArrayRecord& array, const std::vector<int>& grid) {
  std::uint64_t ranks = 1;
  for (auto per_dimension : grid) {
    ranks *= static_cast<std::uint64_t>(per_dimension);
  }
  if (grid.size() != array.global_shape.size() || ranks != array.writer_blocks.size()) {
    return false;
  }
  for (std::size_t rank = 0; rank < array.writer_blocks.size(); ++rank) {
    if (grid_block(array.global_shape, grid, static_cast<int>(rank)) != array.writer_blocks[rank]) {
      return false;
    }
  }
  return true;
}

// The process grid the writers' blocks were split over, when they are exactly grid_block's
// blocks of one: the balanced grid, or the grid their distinct starts suggest. The file keeps
// only the blocks, which any decomposition produces; a grid is the short way to say them.
std::optional<std::vector<int>> process_grid_of(const GlobalArrayRecord& array) {
  const auto dimensions = array.global_shape.size();
  const auto writers = array.writer_blocks.size();
  if (dimensions == 0 || writers == 0) {
    return std::nullopt;
  }
  std::vector<int> suggested;
  for (std::size_t d = 0; d < dimensions; ++d) {
    std::set<std::uint64_t> starts;
    for (const auto& block : array.writer_blocks) {
      if (block.count.size() == dimensions && block.count[d] > 0) {
        starts.insert(block.start[d]);
      }
    }
    suggested.push_back(static_cast<int>(std::max<std::size_t>(starts.size(), 1)));
  }
  for (const auto& grid : {process_grid(static_cast<int>(writers), dimensions), suggested}) {
    if (blocks_of_grid(array, grid)) {
      return grid;
    }
  }
  return std::nullopt;
}

std::string grid_text(const nlohmann::json& grid) {
  std::string text;
  for (const auto& per_dimension : grid) {
    text += (text.empty() ? "" : "x") + per_dimension.dump();
  }
  return text;
}

}  // namespace

nlohmann::json array_json(const GlobalArrayRecord& array) {
  auto blocks = nlohmann::json::array();
  for (std::size_t writer = 0; writer < array.writer_blocks.size(); ++writer) {
    const auto& block = array.writer_blocks[writer];
    blocks.push_back(
        {{"start", block.start},
         {"count", block.count},
         {"xxh64",
          writer < array.writer_xxh64.size() ? hex64(array.writer_xxh64[writer]) : std::string()}});
  }
  nlohmann::json entry = {{"name", array.name},
                          {"dtype", dtype_name(array.dtype)},
                          {"shape", array.global_shape},
                          {"bytes", array.byte_size()},
                          {"writers", array.writer_blocks.size()},
                          {"blocks", blocks}};
  if (const auto grid = process_grid_of(array)) {
    entry["process_grid"] = *grid;
  }
  return entry;
}

void print_array(std::ostream& out, const nlohmann::json& array, const std::string& indent) {
  out << indent << array["name"].get<std::string>() << "  " << array["dtype"].get<std::string>()
      << shape_to_string(array["shape"].get<Shape>()) << "  " << array["bytes"]
      << " bytes  written by " << array["writers"] << " ranks";
  if (array.contains("process_grid")) {
    out << " over a " << grid_text(array["process_grid"]) << " process grid";
  }
  out << "\n";
  std::size_t writer = 0;
  for (const auto& block : array["blocks"]) {
    const Block cells{block["start"].get<Shape>(), block["count"].get<Shape>()};
    out << indent << "  writer " << writer++ << "  " << block_to_string(cells) << "  xxh64 "
        << block["xxh64"].get<std::string>() << "\n";
  }
}

}  // namespace epochrun::cli
