// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

namespace ef {

[[noreturn]] void mpi_fail(const char* call, int code, const char* file, int line);

/// Every MPI call goes through this: a failure throws with the call, its error string and the
/// source location.
#define EF_MPI_CHECK(call)                                                     \
    do {                                                                       \
        const int ef_mpi_rc = (call);                                          \
        if (ef_mpi_rc != MPI_SUCCESS) ::ef::mpi_fail(#call, ef_mpi_rc, __FILE__, __LINE__); \
    } while (0)

/**
 * The ranks of a run: world rank and size, the node-local communicator from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (for placement and threads per rank) and the host
 * name. Owns the node communicator.
 */
class MpiContext {
   public:
    explicit MpiContext(MPI_Comm world = MPI_COMM_WORLD);
    ~MpiContext();
    MpiContext(const MpiContext&) = delete;
    MpiContext& operator=(const MpiContext&) = delete;

    MPI_Comm world() const { return world_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    int local_rank() const { return local_rank_; }
    int local_size() const { return local_size_; }
    /// The ranks of this node (MPI_COMM_TYPE_SHARED), ordered by world rank.
    MPI_Comm node() const { return node_; }
    const std::string& host() const { return host_; }
    /// This rank's node, numbered 0, 1, ... in the order of the nodes' first world ranks: from
    /// MPI_COMM_TYPE_SHARED, not from host names (which need not be unique, as in containers).
    int node_index() const { return node_index_; }
    /// How many nodes the run spans.
    int nodes() const { return nodes_; }
    /// "rank R (HOST)" for an error line. Rank 0 knows every rank's host, the others their own
    /// and rank 0's (gathered once, at construction); an unknown host is left out.
    std::string describe(int rank) const;
    bool is_root() const { return rank_ == 0; }

    /// Broadcasts a string from rank 0.
    std::string broadcast(const std::string& s) const;
    /// Gathers one string per rank on rank 0 (empty vector elsewhere).
    std::vector<std::string> gather(const std::string& s) const;

   private:
    MPI_Comm world_;
    MPI_Comm node_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_index_ = 0, nodes_ = 1;
    std::string host_;
    std::vector<std::string> hosts_;  // rank 0: every rank's; others: {rank 0's}
};

/**
 * Runs `fn` on every rank and agrees on the outcome: if any rank threw, every rank throws the
 * lowest failing rank's ef::Error (its exit code; 1 for an exception that is not an ef::Error).
 * Errors that only some ranks can see (an unwritable output on rank 0, a missing GPU or data
 * file on one node) thus end the job cleanly, with one line from rank 0, instead of leaving the
 * other ranks waiting in the next collective. When not every rank failed and the failing rank is
 * not rank 0, or the run spans several nodes, the message starts with it and its host
 * ("rank 1 (node7): ...", "rank 0 (node3): output.file: cannot write ..."). Every step of a run's
 * set-up that can fail on one rank runs inside one.
 */
void collective(const MpiContext& ctx, const std::function<void()>& fn);
/// The same, with the agreement a nonblocking MPI_Iallreduce that `wait_for` completes (a run's
/// heartbeat watch, so a rank stopped meanwhile is named instead of hanging the others).
void collective(const MpiContext& ctx, const std::function<void()>& fn,
                const std::function<void(MPI_Request&)>& wait_for);

}  // namespace ef
