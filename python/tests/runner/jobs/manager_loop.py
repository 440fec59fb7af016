"""A loop of its own, checkpointed by epochrun.CheckpointManager: a global array in bands of
rows, a replicated vector and a per-node counter, each step a function of the global indices and
the epoch alone (so that any rank count computes the same values). Restores the newest
checkpoint when there is one. Rank 0 appends one JSON line per event to --events (the log has
stdout)."""

import argparse
import json
import time

import numpy as np

import epochrun

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--events", default="events.jsonl")
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--pause", type=float, default=0.0)
parser.add_argument("--async", dest="async_checkpoint", action="store_true")
parser.add_argument("--local-dir")
parser.add_argument("--flush-every", type=int)
parser.add_argument("--keep-last", type=int)
parser.add_argument("--no-last", action="store_true", help="no save is the loop's last")
parser.add_argument("--hold", action="store_true", help="create the arrays and hold views of "
                    "them before the restore")
parser.add_argument("--bad", help="a mistake to make: dtype, shape, name, epoch, closed, or "
                    "one-rank-raises (rank 1, after epoch 2's save)")
args = parser.parse_args()

job = epochrun.Job("manager_loop")
job.global_array("u", np.float64, (12, 8),
                 block_rule=lambda shape, rank, ranks: epochrun.grid_block(shape, (ranks, 1), rank))
job.replicated("w", np.float64, (4,))
job.scalar("steps_here", np.int64, on_rank_change="recreate")

manager = epochrun.CheckpointManager(job, args.dir, async_checkpoint=args.async_checkpoint,
                                     local_dir=args.local_dir, flush_every=args.flush_every,
                                     keep_last=args.keep_last)
comm = manager.comm


def say(**event):
    if comm.rank == 0:
        with open(args.events, "a", encoding="utf-8") as events:
            events.write(json.dumps(event) + "\n")


say(event="start", ranks=comm.size)
held = None
if args.hold:
    manager.create()
    held = manager["u"]
restored = manager.restore()
if restored is None:
    manager.create()
    say(event="created")
else:
    say(event="restored", epoch=restored.epoch, written_by_ranks=restored.written_by_ranks,
        node_local=restored.node_local, arrays=sorted(restored.arrays))
u, w, steps = manager["u"], manager["w"], manager["steps_here"]
if held is not None:
    say(event="held", same_memory=bool(np.shares_memory(held, u)),
        equal=bool(comm.allreduce(np.array([int(np.array_equal(held, u))]), "min")[0]))

if args.bad == "dtype":
    manager.save(1, {"w": np.zeros(4, np.float32)})
elif args.bad == "shape":
    manager["u"] = np.zeros((3, 3))
elif args.bad == "name":
    manager.save(1, {"not there": np.zeros(4)})
elif args.bad == "epoch":
    manager.save(-1)
elif args.bad == "closed":
    manager.close()
    manager.save(1)

block = manager.block("u")
rows = np.arange(block.start[0], block.start[0] + block.count[0])[:, None]
columns = np.arange(8)[None, :]
first = restored.epoch + 1 if restored else 1
for epoch in range(first, args.epochs + 1):
    u *= 0.5
    u += np.sin(rows * 8 + columns + epoch)
    w[...] = w * 0.9 + epoch
    steps += 1
    result = manager.save(epoch, {"w": w}, last=epoch == args.epochs and not args.no_last)
    say(event="saved", epoch=result.epoch, committed=result.committed,
        node_local=result.node_local, in_background=result.in_background,
        failure=result.failure, blocked_seconds=result.blocked_seconds)
    if args.bad == "one-rank-raises" and epoch == 2 and comm.rank == 1:
        raise RuntimeError("rank 1 fails in the loop")
    time.sleep(args.pause)
done = manager.wait()
manager.close()
say(event="closed", latest_committed=None if done is None else done.epoch)
