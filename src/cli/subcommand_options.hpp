// The command-line parsing every subcommand but `run` shares (`run` also reads a config file).
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

namespace epochrun::cli {

// Parses `options` and `positional` into the variables they point to; nullopt when --help was
// asked for (then printed on stdout). Boost's option errors propagate (report_failure: exit 2).
inline std::optional<boost::program_options::variables_map> parse_subcommand(
    int argc, char** argv, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional) {
  namespace po = boost::program_options;
  po::variables_map values;
  po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(),
            values);
  po::notify(values);
  if (values.count("help")) {
    std::cout << options << "\n";
    return std::nullopt;
  }
  return values;
}

}  // namespace epochrun::cli
