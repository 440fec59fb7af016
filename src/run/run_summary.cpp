#include "epochrun/run_summary.hpp"

#include <xxhash.h>

#include "durable_file.hpp"
#include "json_text.hpp"
#include "run_history_json.hpp"
#include "run_summary_json.hpp"

namespace epochrun {
namespace {

template <typename T>
nlohmann::json values_of(const Blob& blob) {
  auto values = blob.as<T>();
  return nlohmann::json(std::vector<T>(values.begin(), values.end()));
}

}  // namespace

nlohmann::json blob_to_json(const Blob& blob) {
  nlohmann::json json = {{"dtype", dtype_name(blob.dtype())},
                         {"shape", blob.shape()},
                         {"xxh64", XXH64(blob.raw().data(), blob.byte_size(), 0)}};
  if (blob.size() > kSummaryMaxValues) {
    return json;
  }
  switch (blob.dtype()) {
    case DType::kF32:
      json["values"] = values_of<float>(blob);
      break;
    case DType::kF64:
      json["values"] = values_of<double>(blob);
      break;
    case DType::kI32:
      json["values"] = values_of<std::int32_t>(blob);
      break;
    case DType::kI64:
      json["values"] = values_of<std::int64_t>(blob);
      break;
    case DType::kU8:
      json["values"] = values_of<std::uint8_t>(blob);
      break;
    case DType::kBytes:
      break;
  }
  return json;
}

nlohmann::json to_json(const RunSummary& summary) {
  auto epochs_with_errors = [](const std::vector<FailedSave>& failures) {
    auto list = nlohmann::json::array();
    for (const auto& failure : failures) {
      list.push_back({{"epoch", failure.epoch}, {"error", failure.error}});
    }
    return list;
  };
  auto outputs = nlohmann::json::object();
  for (const auto& [node, blobs] : summary.outputs) {
    auto& node_json = outputs[node] = nlohmann::json::object();
    for (const auto& [name, blob] : blobs) {
      node_json[name] = blob_to_json(blob);
    }
  }
  auto config_changes = nlohmann::json::array();
  for (const auto& change : summary.config_changes) {
    config_changes.push_back({{"key", change.key},
                              {"old", nlohmann::json::parse(change.old_json)},
                              {"new", nlohmann::json::parse(change.new_json)}});
  }
  const auto level_json = [](const SaveLevelTimes& level) {
    return nlohmann::json{{"saves", level.saves},
                          {"seconds", level.seconds},
                          {"blocked_seconds", level.blocked_seconds},
                          {"redundancy_seconds", level.redundancy_seconds},
                          {"background_redundancy_seconds", level.background_redundancy_seconds}};
  };
  auto optional_json = [](const auto& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  return {{"job", summary.job},
          {"num_ranks", summary.num_ranks},
          {"resumed_from", optional_json(summary.resumed_from)},
          {"resumed_from_ranks", optional_json(summary.resumed_from_ranks)},
          {"last_epoch", summary.last_epoch},
          {"epochs_run", summary.epochs_run},
          {"stop_kind", stop_kind_name(summary.stop_kind)},
          {"stop_reason", summary.stop_reason},
          {"checkpoint_dir", summary.checkpoint_dir.string()},
          {"resumed_from_level", optional_json(summary.resumed_from_level)},
          {"resume_note", optional_json(summary.resume_note)},
          {"resumed_parts", optional_json(summary.resumed_parts)},
          {"committed_checkpoints", summary.committed},
          {"node_local_checkpoints", summary.saved_node_local},
          {"failed_saves", epochs_with_errors(summary.failed_saves)},
          {"save_levels",
           {{"node-local", level_json(summary.node_local_saves)},
            {"flushed", level_json(summary.flushed_saves)}}},
          {"skipped_corrupt_checkpoints", epochs_with_errors(summary.skipped_corrupt)},
          {"deleted_checkpoints", summary.deleted},
          {"uploaded_to", optional_json(summary.uploaded_to)},
          {"upload_error", optional_json(summary.upload_error)},
          {"last_committed_epoch", optional_json(summary.last_committed_epoch)},
          {"exit_code", summary.exit_code},
          {"restart_count", summary.restart_count},
          {"slurm_job_id", optional_json(summary.slurm_job_id)},
          {"config_changes", config_changes},
          {"history", summary.history},
          {"seconds", summary.seconds},
          {"outputs", outputs}};
}

void write_summary_json(const RunSummary& summary, const std::filesystem::path& file) {
  write_file_atomically(file, json_text(to_json(summary), 2) + "\n");
}

}  // namespace epochrun
