// What the reader says when it refuses a crafted checkpoint (the crafted-file tests of every
// format version).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"

namespace epochrun::testing {

// The message of CheckpointReader's refusal of `file`, or a test failure when it accepts it.
inline std::string refusal(const std::filesystem::path& file) {
  try {
    CheckpointReader reader(file);
  } catch (const CheckpointError& error) {
    return error.what();
  }
  ADD_FAILURE() << "the crafted file was accepted";
  return "";
}

}  // namespace epochrun::testing
