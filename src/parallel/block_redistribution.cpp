#include "block_redistribution.hpp"

#include <mpi.h>

#include <memory>

#include "epochrun/errors.hpp"
#include "mpi_check.hpp"

namespace epochrun {

namespace {

// Committed MPI datatypes, freed together.
class Datatypes {
 public:
  Datatypes() = default;
  Datatypes(const Datatypes&) = delete;
  Datatypes& operator=(const Datatypes&) = delete;
  ~Datatypes() {
    for (auto& type : types_) {
      MPI_Type_free(&type);
    }
  }
  MPI_Datatype add(MPI_Datatype type) {
    types_.push_back(type);
    return type;
  }
  MPI_Datatype commit(MPI_Datatype type) {
    add(type);
    check_mpi(MPI_Type_commit(&types_.back()), "MPI_Type_commit");
    return type;
  }

 private:
  std::vector<MPI_Datatype> types_;
};

// The cells of `part` (inside `piece`) within the row-major buffer of `piece`.
MPI_Datatype part_of(const Block& piece, const Block& part, MPI_Datatype element,
                     Datatypes& types) {
  std::vector<int> sizes;
  std::vector<int> subsizes;
  std::vector<int> starts;
  for (std::size_t d = 0; d < piece.start.size(); ++d) {
    sizes.push_back(to_count(piece.count[d], "a block's dimension"));
    subsizes.push_back(to_count(part.count[d], "a block's dimension"));
    starts.push_back(to_count(part.start[d] - piece.start[d], "a block's start"));
  }
  MPI_Datatype type = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_create_subarray(static_cast<int>(sizes.size()), sizes.data(), subsizes.data(),
                                     starts.data(), MPI_ORDER_C, element, &type),
            "MPI_Type_create_subarray");
  return types.add(type);
}

// Several parts at absolute addresses as one datatype (sent or received from MPI_BOTTOM), in
// the order given: a sender and its receiver list the same parts in the same order.
struct Message {
  std::vector<MPI_Datatype> parts;
  std::vector<MPI_Aint> addresses;
  std::uint64_t elements = 0;

  void add(MPI_Datatype part, const void* buffer, std::uint64_t part_elements) {
    MPI_Aint address = 0;
    check_mpi(MPI_Get_address(buffer, &address), "MPI_Get_address");
    parts.push_back(part);
    addresses.push_back(address);
    elements += part_elements;
  }
  MPI_Datatype type(Datatypes& types) const {
    const std::vector<int> ones(parts.size(), 1);
    MPI_Datatype combined = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_create_struct(static_cast<int>(parts.size()), ones.data(), addresses.data(),
                                     parts.data(), &combined),
              "MPI_Type_create_struct");
    return types.commit(combined);
  }
};

void check_pieces(const std::vector<Block>& listed, const std::vector<HeldPiece>& mine,
                  std::size_t element_bytes) {
  if (listed.size() != mine.size()) {
    throw UsageError("redistribute_blocks: this rank passes " + std::to_string(mine.size()) +
                     " pieces, its list has " + std::to_string(listed.size()));
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (!(mine[i].block == listed[i]) ||
        mine[i].data.size() != mine[i].block.element_count() * element_bytes) {
      throw UsageError("redistribute_blocks: piece " + block_to_string(mine[i].block) + " of " +
                       std::to_string(mine[i].data.size()) + " bytes does not match its list");
    }
  }
}

}  // namespace

void redistribute_blocks(const Communicator& comm, std::size_t element_bytes,
                         const std::vector<std::vector<Block>>& held_by,
                         const std::vector<HeldPiece>& mine, const std::vector<Block>& wanted_by,
                         std::span<std::byte> wanted, std::uint64_t in_place) {
  const int rank = comm.rank();
  const auto me = static_cast<std::size_t>(rank);
  check_pieces(held_by.at(me), mine, element_bytes);
  const Block& my_block = wanted_by.at(me);
  if (wanted.size() != my_block.element_count() * element_bytes) {
    throw UsageError("redistribute_blocks: " + std::to_string(wanted.size()) +
                     " bytes for the wanted block " + block_to_string(my_block));
  }
  Datatypes types;
  MPI_Datatype element = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_contiguous(to_count(element_bytes, "an element's size"), MPI_BYTE, &element),
            "MPI_Type_contiguous");
  types.commit(element);

  std::vector<MPI_Request> requests;
  std::uint64_t received = in_place;
  auto post = [&](const Message& message, int peer, bool send) {
    if (message.parts.empty()) {
      return;
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const MPI_Datatype type = message.type(types);
    constexpr int kTag = 7;
    check_mpi(send ? MPI_Isend(MPI_BOTTOM, 1, type, peer, kTag, comm.raw(), &request)
                   : MPI_Irecv(MPI_BOTTOM, 1, type, peer, kTag, comm.raw(), &request),
              send ? "MPI_Isend" : "MPI_Irecv");
    requests.push_back(request);
  };
  for (std::size_t peer = 0; peer < held_by.size(); ++peer) {
    // What `peer` sends me: the parts of its pieces inside my block, in its pieces' order.
    Message incoming;
    for (const auto& piece : held_by[peer]) {
      const Block part = intersection(piece, my_block);
      if (part.element_count() > 0) {
        incoming.add(part_of(my_block, part, element, types), wanted.data(), part.element_count());
      }
    }
    received += incoming.elements;
    post(incoming, static_cast<int>(peer), false);
    // What I send `peer`: the parts of my pieces inside its block.
    Message outgoing;
    for (const auto& piece : mine) {
      const Block part = intersection(piece.block, wanted_by.at(peer));
      if (part.element_count() > 0) {
        outgoing.add(part_of(piece.block, part, element, types), piece.data.data(),
                     part.element_count());
      }
    }
    post(outgoing, static_cast<int>(peer), true);
  }
  // Posted before the check below, so that a rank refusing still completes its sends and
  // receives: the other ranks do not wait for it forever.
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  if (received != my_block.element_count()) {
    throw UsageError("redistribute_blocks: the pieces hold " + std::to_string(received) +
                     " cells of the wanted block " + block_to_string(my_block) + " of " +
                     std::to_string(my_block.element_count()));
  }
}

}  // namespace epochrun
