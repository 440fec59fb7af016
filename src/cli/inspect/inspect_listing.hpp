// `epochrun inspect`'s listing of checkpoints: a summary line each, the blob tree with --blobs,
// and with --verify what was checked in each file and what was found.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "inspect/inspect_source.hpp"

namespace epochrun::cli {

struct ListingOptions {
  bool blobs = false;   // every node's blobs: name, dtype, shape, bytes, xxh64
  bool verify = false;  // read every blob back and check its xxh64
};

// A blob's record as JSON: dtype, shape, bytes and xxh64 (16 hexadecimal digits).
nlohmann::json record_json(const BlobRecord& record);

// The JSON entry of one checkpoint ("valid" false and "error" when it is damaged); nullopt when
// it is gone (retention of a running job may delete it between the listing and the reading:
// that is not damage).
std::optional<nlohmann::json> describe_checkpoint(const CheckpointChoice& choice,
                                                  const ListingOptions& options);

// The entries as text, one line per checkpoint (and its blobs and findings beneath).
void print_checkpoints(std::ostream& out, const nlohmann::json& entries,
                       const ListingOptions& options);

}  // namespace epochrun::cli
