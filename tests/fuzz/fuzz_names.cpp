// The small parsers of names and values that come from users and from files: blob/node/job
// names, checkpoint file names, --resume-from-epoch, dtypes, log levels, and the blob codec of
// the download gather.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "blob_codec.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/logging.hpp"
#include "epochrun/names.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using epochrun::Error;
  try {
    epochrun::validate_name(text, "blob name");
  } catch (const epochrun::UsageError&) {
  }
  if (auto epoch = epochrun::parse_checkpoint_file_name(text)) {
    // Whatever parses must print back to itself.
    if (epochrun::checkpoint_file_name(*epoch) != text) {
      __builtin_trap();
    }
  }
  try {
    (void)epochrun::ResumeRequest::parse(text);
  } catch (const epochrun::UsageError&) {
  }
  try {
    (void)epochrun::parse_dtype(text);
  } catch (const epochrun::UsageError&) {
  }
  try {
    (void)epochrun::parse_log_level(text);
  } catch (const epochrun::UsageError&) {
  }
  try {
    (void)epochrun::decode_blobs(std::span(reinterpret_cast<const std::byte*>(data), size));
  } catch (const epochrun::Error&) {
    // A malformed buffer.
  } catch (const nlohmann::json::exception&) {
    // A malformed JSON header.
  }
  return 0;
}
