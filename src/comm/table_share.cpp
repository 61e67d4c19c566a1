// SPDX-License-Identifier: MIT
#include "src/comm/table_share.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

#include "src/run/setup_trace.hpp"

namespace ef {

namespace {

std::string megabytes(std::size_t doubles) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(doubles) * sizeof(double) / 1e6);
    return text;
}

/// Releases a shared window unless MPI has already finished (a table outliving the run).
void free_window(MPI_Win& win) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || win == MPI_WIN_NULL) return;
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
}

/**
 * A barrier that waits asleep: MPI_Barrier polls at full speed, and a rank whose slice is done
 * would take the core of a rank still computing where ranks outnumber cores (a dry run on 2
 * cores: 2.9-3.3 s of CPU on the waiting rank against 1.2-1.3 s). Sleeps of 20 us doubling to
 * 1 ms: a rank learns of the last slice within ~1 ms.
 */
void sleeping_barrier(MPI_Comm comm) {
    MPI_Request req = MPI_REQUEST_NULL;
    EF_MPI_CHECK(MPI_Ibarrier(comm, &req));
    int done = 0;
    for (auto pause = std::chrono::microseconds(20);; pause = std::min(2 * pause, std::chrono::microseconds(1000))) {
        EF_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        std::this_thread::sleep_for(pause);
    }
}

class NodeTableShare final : public TableShare {
   public:
    explicit NodeTableShare(const MpiContext& ctx) : world_rank_(ctx.rank()), host_(ctx.host()) {
        EF_MPI_CHECK(MPI_Comm_dup(ctx.node(), &comm_));
        // A window that cannot be made is answered with a per-rank table, not the end of the run.
        EF_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
        EF_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
        EF_MPI_CHECK(MPI_Comm_size(comm_, &size_));
        // The fewest and most ranks of a node, so rank 0's line does not speak for nodes unlike its own.
        int sizes[2] = {-size_, size_};
        EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, ctx.world()));
        fewest_ = -sizes[0];
        most_ = sizes[1];
    }
    ~NodeTableShare() override {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm_);
    }

    std::shared_ptr<double> allocate(std::size_t count) override {
        count_ = count;
        allocated_ = true;
        shared_ = false;
        win_ = MPI_WIN_NULL;
        if (size_ == 1) return own(count, "");
        // Arrive together, asleep: MPI_Win_allocate_shared waits for the last rank in a busy poll
        // (a rank still building its data or worker took a waiting rank's core for seconds).
        sleeping_barrier(comm_);
        double* base = nullptr;
        MPI_Win win = MPI_WIN_NULL;
        const MPI_Aint bytes = static_cast<MPI_Aint>(rank_ == 0 ? count * sizeof(double) : 0);
        const int rc = MPI_Win_allocate_shared(bytes, sizeof(double), MPI_INFO_NULL, comm_, &base, &win);
        int ok = rc == MPI_SUCCESS ? 1 : 0, all = 0;
        EF_MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm_));
        if (!all) {
            if (ok) MPI_Win_free(&win);
            return own(count, "; the node-shared window (MPI_Win_allocate_shared, " + megabytes(count) +
                                  ") could not be made, so each rank holds its own (osc_sm_backing_directory full?)");
        }
        MPI_Aint size = 0;
        int unit = 0;
        double* table = nullptr;
        EF_MPI_CHECK(MPI_Win_shared_query(win, 0, &size, &unit, &table));
        EF_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        trace_window();
        shared_ = true;
        win_ = win;
        // Pages of a fresh window are zero; each rank's slice is first touched (and so placed on
        // its NUMA node) by the rank that computes it.
        std::shared_ptr<double> mem(table, [win](double*) mutable { free_window(win); });
        made_.push_back(mem);  // freed with the share, at the same point on every rank
        return mem;
    }

    std::pair<int, int> slice(int rows) const override {
        if (!shared_) return {0, rows};
        const long long n = rows;
        return {static_cast<int>(n * rank_ / size_), static_cast<int>(n * (rank_ + 1) / size_)};
    }

    void publish() override {
        if (!shared_) return;
        EF_MPI_CHECK(MPI_Win_sync(win_));  // this rank's stores visible...
        sleeping_barrier(comm_);            // ...once every rank has written its slice...
        EF_MPI_CHECK(MPI_Win_sync(win_));  // ...and the others' stores seen here
    }

    std::string describe(const std::string& what) const override {
        if (size_ == 1 || !allocated_) return "";  // a lone rank, or nothing made: nothing to say
        if (!shared_) return what + " " + megabytes(count_) + " per rank" + note_;
        return what + " " + megabytes(count_) + ", one copy per node shared by its " + std::to_string(size_) +
               " ranks, each built 1/" + std::to_string(size_) + " of the rows" +
               (fewest_ == most_ ? ""
                                 : " (rank 0's node; the nodes have " + std::to_string(fewest_) + " to " +
                                       std::to_string(most_) + " ranks, a node of one builds its own)");
    }

   private:
    /// EF_SETUP_TRACE: which node this rank shares with and whether its memory is the window's, so
    /// a multi-node run shows one window per node (tests/mpi/multinode.sh).
    void trace_window() const {
        SetupTrace trace(world_rank_);
        trace.stage("share");
        const std::string step = "node window " + megabytes(count_) + " on " + host_ + ": local rank " +
                                 std::to_string(rank_) + " of " + std::to_string(size_) +
                                 (rank_ == 0 ? ", holds the memory" : ", maps local rank 0's");
        trace.mark(step.c_str());
    }

    std::shared_ptr<double> own(std::size_t count, const std::string& note) {
        note_ = note;
        auto v = std::make_shared<std::vector<double>>(count, 0.0);
        return std::shared_ptr<double>(v, v->data());
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Win win_ = MPI_WIN_NULL;
    int world_rank_ = 0, rank_ = 0, size_ = 1, fewest_ = 1, most_ = 1;
    std::string host_;
    bool shared_ = false, allocated_ = false;
    std::size_t count_ = 0;
    std::vector<std::shared_ptr<double>> made_;  ///< the windows made, released with the share
    std::string note_;
};

}  // namespace

std::unique_ptr<TableShare> make_node_table_share(const MpiContext& ctx) {
    return std::make_unique<NodeTableShare>(ctx);
}

}  // namespace ef
