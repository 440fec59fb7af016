#include "local_manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "error_table.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

constexpr std::string_view kFormat = "epochrun node-local epoch";
constexpr std::string_view kPrefix = "epoch-", kSuffix = ".local.json";
// A manifest holds the configuration record and about 150 bytes a rank: one larger than this is
// damaged, and is judged so without being read (one that reads as terabytes would exhaust
// rank 0's memory first).
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{256} << 20;

// The epoch of a manifest's name as local_manifest_file makes it; nullopt for any other name.
std::optional<std::int64_t> parse_manifest_name(std::string_view name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const auto digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  std::int64_t epoch = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), epoch);
  if (digits.size() < 6 || digits[0] == '-' || error != std::errc() ||
      end != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return epoch;
}

}  // namespace

std::filesystem::path local_manifest_file(const std::filesystem::path& checkpoint_dir,
                                          std::int64_t epoch) {
  return checkpoint_dir / fmt::format("epoch-{:06d}.local.json", epoch);
}

std::string local_manifest_text(const LocalManifest& manifest) {
  auto parts = nlohmann::json::array();
  for (const auto& part : manifest.parts) {
    parts.push_back({{"rank", part.rank},
                     {"host", part.host},
                     {"record_xxh64", part.record_xxh64},
                     {"file_bytes", part.file_bytes}});
  }
  const nlohmann::json json = {{"format", kFormat},
                               {"version", 1},
                               {"job", manifest.job},
                               {"epoch", manifest.epoch},
                               {"ranks", manifest.ranks},
                               {"redundancy", manifest.redundancy},
                               {"config", manifest.config_json},
                               {"parts", parts}};
  return json.dump(1) + "\n";
}

LocalManifest parse_local_manifest(const std::string& text, const std::string& what) {
  try {
    const auto json = nlohmann::json::parse(text);
    if (json.at("format").get<std::string>() != kFormat || json.at("version").get<int>() != 1) {
      throw Error("not a node-local epoch's manifest of version 1");
    }
    // Read as 64-bit and checked: get<int> would take 2^32 + 1 for 1.
    const auto ranks = json.at("ranks").get<std::int64_t>();
    LocalManifest manifest{
        json.at("job").get<std::string>(),        json.at("epoch").get<std::int64_t>(), 0,
        json.at("redundancy").get<std::string>(), json.at("config").get<std::string>(), {}};
    for (const auto& part : json.at("parts")) {
      const auto rank = part.at("rank").get<std::int64_t>();
      if (rank != static_cast<std::int64_t>(manifest.parts.size())) {
        throw Error("its parts are not in rank order (part " +
                    std::to_string(manifest.parts.size()) + " is of rank " + std::to_string(rank) +
                    ")");
      }
      manifest.parts.push_back(LocalPart{static_cast<int>(rank), part.at("host").get<std::string>(),
                                         part.at("record_xxh64").get<std::uint64_t>(),
                                         part.at("file_bytes").get<std::uint64_t>()});
    }
    if (ranks <= 0 || manifest.parts.size() != static_cast<std::uint64_t>(ranks)) {
      throw Error("it records " + std::to_string(manifest.parts.size()) + " parts of " +
                  std::to_string(ranks) + " ranks");
    }
    manifest.ranks = static_cast<int>(ranks);  // as many as its parts
    return manifest;
  } catch (const nlohmann::json::parse_error& error) {
    // Its own text would echo what it read last, up to a kilobyte of the file.
    throw CorruptCheckpoint(what + ": not valid JSON (at byte " + std::to_string(error.byte) + ")");
  } catch (const std::exception& error) {
    throw CorruptCheckpoint(what + ": " + error.what());
  }
}

void write_local_manifest(const std::filesystem::path& checkpoint_dir,
                          const LocalManifest& manifest) {
  write_file_atomically(local_manifest_file(checkpoint_dir, manifest.epoch),
                        local_manifest_text(manifest));
}

LocalManifest read_local_manifest(const std::filesystem::path& checkpoint_dir, std::int64_t epoch) {
  const auto file = local_manifest_file(checkpoint_dir, epoch);
  // Opened as a checkpoint file is: a FIFO or a directory under the manifest's name is refused,
  // not read (a FIFO's read would wait for a writer forever).
  std::string text;
  try {
    read_or_corrupt([&] { text = read_regular_file(file, kMaxManifestBytes); });
  } catch (const CheckpointNotFound&) {
    throw CheckpointNotFound("no node-local epoch " + std::to_string(epoch) + ": " + file.string() +
                             " is missing");
  }
  auto manifest = parse_local_manifest(text, file.string());
  if (manifest.epoch != epoch) {
    throw CorruptCheckpoint(file.string() + " records epoch " + std::to_string(manifest.epoch));
  }
  return manifest;
}

std::vector<std::int64_t> local_manifest_epochs(const std::filesystem::path& checkpoint_dir) {
  std::vector<std::int64_t> epochs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint_dir, error)) {
    if (const auto epoch = parse_manifest_name(entry.path().filename().string())) {
      epochs.push_back(*epoch);
    }
  }
  std::sort(epochs.begin(), epochs.end());
  return epochs;
}

int remove_local_manifests(const std::filesystem::path& checkpoint_dir,
                           const std::vector<std::int64_t>& keep,
                           std::optional<std::int64_t> writing) {
  const auto doomed = [&](const std::string& name) {
    const auto target = temporary_target(name);
    const auto epoch = parse_manifest_name(target ? *target : name);
    return epoch &&
           (target ? epoch != writing : std::find(keep.begin(), keep.end(), *epoch) == keep.end());
  };
  int failed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint_dir, error)) {
    const auto name = entry.path().filename().string();
    if (doomed(name) && !std::filesystem::remove(entry.path(), error) && error) {
      ++failed;
    }
  }
  return failed;
}

}  // namespace epochrun
