// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace ef {

class MpiContext;

/**
 * Where the rows of a parameter-independent table (the dis-mellin tables) are computed and
 * stored. Without a share a process computes every row into its own memory. A share makes the
 * table a property of the node instead: the ranks of a node agree on one copy and each computes
 * a slice of its rows (make_node_table_share()).
 *
 * Every call is collective over the ranks that share, in the same order on each of them, and a
 * row is a pure function of its inputs, so who computes it never changes its bits.
 */
class TableShare {
   public:
    virtual ~TableShare() = default;
    /// Collective: `count` doubles, zeroed, the same memory on every sharing rank (the returned
    /// pointer keeps it alive; on a node share its release is collective too).
    virtual std::shared_ptr<double> allocate(std::size_t count) = 0;
    /// The rows [first, second) of `rows` this rank computes (all of them for a lone rank).
    virtual std::pair<int, int> slice(int rows) const = 0;
    /// Collective: returns once every sharer has written its slice; read-only from then on.
    virtual void publish() = 0;
    /// How the last table was placed, for the run's model line ("tables 43.5 MB, one copy per
    /// node shared by its 4 ranks, ..." or why each rank has its own; `what` names the table);
    /// empty for a lone rank, or before any allocate().
    virtual std::string describe(const std::string& what = "tables") const = 0;
};

/**
 * The ranks of this node (MPI_COMM_TYPE_SHARED) share one table in an MPI-3 shared-memory
 * window (MPI_Win_allocate_shared: local rank 0 owns the memory, the others map it); each local
 * rank computes a contiguous slice of the rows with its own threads, so the node's cores build
 * the table once, together, instead of every rank building all of it at the same time, and the
 * node holds one copy instead of one per rank. Where the window cannot be made (a backing
 * directory too small: osc_sm_backing_directory), every rank builds its own and describe() says
 * why. A single-rank node takes the plain path (no window). The share keeps every window it
 * made until it is itself destroyed (as well as while a returned pointer lives): MPI_Win_free
 * is collective, so a rank that drops its last pointer early (a GPU worker, once its inputs are
 * uploaded) must not free the window while the others still use it.
 */
std::unique_ptr<TableShare> make_node_table_share(const MpiContext& ctx);

}  // namespace ef
