# SPDX-License-Identifier: BSD-3-Clause
"""How the ranks of desi_proc's extraction group share one frame, as gpu_specter's ranks
share its bundles: the extractors are one rank per node on CPUs (with the CPUs of every rank
of its node, whose ranks would otherwise split one node's cores into small single-threaded
shares) and one rank per GPU on GPU nodes (each with its own device and a share of the node's
CPUs), never more than the frame's bundles; each extracts a contiguous share of the bundles
in this process (the ex2d module) and the first, rank 0, gathers the parts and writes the
frame. The other ranks wait without spinning."""

import importlib
import os
import socket

# The MPI tag of the parts' messages, apart from desi_proc's own traffic on the group.
PART_TAG = 7301


def node_name():
    return socket.gethostname()


def module_imports():
    """Whether the ex2d module imports here: only in process can ranks share a frame."""
    try:
        importlib.import_module("ex2d")
    except ImportError:
        return False
    return True


def visible_gpus(args):
    """The CUDA devices ex2d extracts on in this process: none with ``--no-gpu`` or
    $DESI_NO_GPU, or where the module does not import (the program then picks its own)."""
    if getattr(args, "no_gpu", False) or os.environ.get("DESI_NO_GPU"):
        return 0
    try:
        import ex2d
    except ImportError:
        return 0
    return ex2d.cuda_device_count()


def member():
    """What a rank tells the group about itself: (node, its CPUs)."""
    return node_name(), sorted(os.sched_getaffinity(0))


def plan_extractors(members, ngpu, nbundle, shareable):
    """The extractors among ``members`` (each rank's (node, CPUs), in rank order): {rank:
    (CPUs, CUDA device or None)}, rank 0 always among them. ``ngpu`` devices per node;
    ``shareable`` False (no module, so no exchange of parts) keeps rank 0's node only."""
    by_node = {}
    for rank, (node, _cpus) in enumerate(members):
        by_node.setdefault(node, []).append(rank)
    plan = {}
    for ranks in by_node.values():
        cpus = sorted(set().union(*(members[rank][1] for rank in ranks)))
        chosen = ranks[:max(1, min(len(ranks), ngpu))]
        for index, rank in enumerate(chosen):
            mine = cpus[index * len(cpus) // len(chosen):(index + 1) * len(cpus) // len(chosen)]
            plan[rank] = (mine, index if ngpu else None)
    extractors = sorted(plan)[:max(1, nbundle if shareable else 1)]
    return {rank: plan[rank] for rank in extractors}


def bundles_in(args):
    """The frame's bundles: nspec (the PSF's fibres from specmin when not given) over
    bundlesize; 1 where the PSF cannot be read (ex2d then reports why)."""
    nspec = args.nspec
    if nspec is None:
        try:
            import ex2d
            nspec = ex2d.read_psf(args.psf).nspec - (args.specmin or 0)
        except Exception:  # noqa: BLE001 (any failure: ex2d's own run names it)
            return 1
    return max(1, nspec // (args.bundlesize or 25))


class PartExchange:
    """``ex2d.run``'s share for one frame: this rank's place among the extractors, and the
    exchange of parts. Each extractor other than the writer sends the writer exactly one
    message: its part, or its failure; the writer takes them all, whatever happens to its
    own extraction, so that no rank waits on a send nobody receives."""

    def __init__(self, comm, extractors):
        self.comm = comm
        self.extractors = extractors
        self.writer = extractors[0]
        self.index = extractors.index(comm.rank)
        self.count = len(extractors)
        self.collected = False

    def _collect(self):
        self.collected = True
        return [self.comm.recv(source=rank, tag=PART_TAG) for rank in self.extractors[1:]]

    def gather(self, part):
        if self.comm.rank != self.writer:
            self.comm.send(("part", part), dest=self.writer, tag=PART_TAG)
            return None
        messages = self._collect()
        failures = [payload for kind, payload in messages if kind == "failed"]
        if failures:
            from .extract import Ex2dError
            raise Ex2dError(*failures[0])
        return [part] + [payload for _kind, payload in messages]

    def failed(self, error):
        """This rank's extraction failed with ``error`` (exit code, message) before its part
        was exchanged: the writer hears of it, or, being the writer, takes the others'."""
        if self.comm.rank != self.writer:
            self.comm.send(("failed", error), dest=self.writer, tag=PART_TAG)
        elif not self.collected:
            self._collect()
