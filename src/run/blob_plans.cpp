#include "blob_plans.hpp"

#include "collective_errors.hpp"

namespace epochrun {
namespace {

std::vector<Block> blocks_of(const BlobSpec& spec, int ranks) {
  std::vector<Block> blocks;
  blocks.reserve(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    blocks.push_back(spec.block(rank, ranks));
  }
  return blocks;
}

}  // namespace

void check_global_arrays(const Job& job, const Communicator& comm,
                         std::chrono::duration<double> timeout) {
  run_on_root_then_agree_within(comm, "the job's global arrays", timeout, [&] {
    for (const auto& spec : job.expected_blobs()) {
      if (spec.kind == BlobKind::kGlobalArray) {
        check_tiling(spec.name, spec.shape, blocks_of(spec, comm.size()));
      }
    }
  });
}

std::vector<BlobPlan> blob_plans(const Job& job, const Communicator& comm,
                                 const std::vector<std::string>& names) {
  std::vector<BlobPlan> plans;
  plans.reserve(names.size());
  for (const auto& name : names) {
    BlobPlan plan{name, StorageKind::kPerNode, {}, {}};
    if (const auto* spec = job.find_blob(name)) {
      if (spec->kind == BlobKind::kReplicated) {
        plan.kind = StorageKind::kReplicated;
      } else if (spec->kind == BlobKind::kGlobalArray) {
        plan.kind = StorageKind::kGlobalArray;
        plan.global_shape = spec->shape;
        plan.blocks = std::make_shared<const std::vector<Block>>(blocks_of(*spec, comm.size()));
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

LoadRequest load_request(const Job& job, const Communicator& comm, std::int64_t epoch,
                         const std::vector<std::string>& node_names, const MpiIoHints& hints) {
  LoadRequest request{epoch, job.name(), node_names, {}, {}, hints, {}};
  for (const auto& spec : job.expected_blobs()) {
    if (spec.kind == BlobKind::kGlobalArray) {
      request.array_blocks[spec.name] = blocks_of(spec, comm.size());
    } else if (spec.kind == BlobKind::kPerNode) {
      const auto& change = spec.on_rank_change;
      if (change.kind == RankChange::Kind::kRecreate) {
        request.per_node_rules[spec.name] = PerNodeRule{false, {}};
      } else if (change.kind == RankChange::Kind::kRedistribute) {
        request.per_node_rules[spec.name] = PerNodeRule{true, change.redistribute};
      }
    }
  }
  return request;
}

}  // namespace epochrun
