// The effective configuration of a run, as every checkpoint records it (and a resume compares
// it). Internal to the run subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

namespace epochrun::cli {

// Every option in `values` (both sources, defaults included) by its name, but --help and those
// whose value is not a text, an integer, a real or a boolean (--allow-config-change).
nlohmann::json config_to_json(const boost::program_options::variables_map& values);

}  // namespace epochrun::cli
