// SPDX-License-Identifier: MIT
#include <ensemblefit/comm/mpi_context.hpp>

#include <ensemblefit/core/error.hpp>

namespace ef {

void mpi_fail(const char* call, int code, const char* file, int line) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(code, text, &len);
    throw runtime_error(std::string("MPI call failed: ") + call + ": " + text + " (" + file + ":" +
                        std::to_string(line) + ")");
}

MpiContext::MpiContext(MPI_Comm world) : world_(world) {
    EF_MPI_CHECK(MPI_Comm_rank(world_, &rank_));
    EF_MPI_CHECK(MPI_Comm_size(world_, &size_));
    EF_MPI_CHECK(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_));
    EF_MPI_CHECK(MPI_Comm_rank(node_, &local_rank_));
    EF_MPI_CHECK(MPI_Comm_size(node_, &local_size_));
    // Nodes numbered by their first ranks: each node's local rank 0 counts the first ranks before
    // it (MPI_Exscan) and tells its node.
    const int first = local_rank_ == 0 ? 1 : 0;
    int before = 0;
    EF_MPI_CHECK(MPI_Exscan(&first, &before, 1, MPI_INT, MPI_SUM, world_));
    node_index_ = rank_ == 0 ? 0 : before;  // MPI_Exscan leaves rank 0's undefined
    EF_MPI_CHECK(MPI_Bcast(&node_index_, 1, MPI_INT, 0, node_));
    EF_MPI_CHECK(MPI_Allreduce(&first, &nodes_, 1, MPI_INT, MPI_SUM, world_));
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    EF_MPI_CHECK(MPI_Get_processor_name(name, &len));
    host_.assign(name, static_cast<size_t>(len));
    hosts_ = gather(host_);
    if (rank_ != 0) hosts_ = {broadcast("")};
    else broadcast(host_);
}

std::string MpiContext::describe(int rank) const {
    std::string host;
    if (rank == rank_) host = host_;
    else if (rank_ == 0 && rank >= 0 && rank < size_) host = hosts_[static_cast<size_t>(rank)];
    else if (rank == 0 && !hosts_.empty()) host = hosts_[0];
    return "rank " + std::to_string(rank) + (host.empty() ? "" : " (" + host + ")");
}

MpiContext::~MpiContext() {
    if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

std::string MpiContext::broadcast(const std::string& s) const {
    long long n = static_cast<long long>(s.size());
    EF_MPI_CHECK(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, world_));
    std::string out = rank_ == 0 ? s : std::string(static_cast<size_t>(n), '\0');
    if (n > 0) EF_MPI_CHECK(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, world_));
    return out;
}

std::vector<std::string> MpiContext::gather(const std::string& s) const {
    int n = static_cast<int>(s.size());
    std::vector<int> sizes(static_cast<size_t>(size_));
    EF_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, world_));
    std::vector<int> displs(static_cast<size_t>(size_), 0);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
        displs[static_cast<size_t>(r)] = total;
        total += sizes[static_cast<size_t>(r)];
    }
    std::string all(static_cast<size_t>(rank_ == 0 ? total : 0), '\0');
    EF_MPI_CHECK(MPI_Gatherv(s.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, 0,
                             world_));
    std::vector<std::string> out;
    if (rank_ == 0)
        for (int r = 0; r < size_; ++r)
            out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                     static_cast<size_t>(sizes[static_cast<size_t>(r)])));
    return out;
}

void collective(const MpiContext& ctx, const std::function<void()>& fn) { collective(ctx, fn, nullptr); }

void collective(const MpiContext& ctx, const std::function<void()>& fn,
                const std::function<void(MPI_Request&)>& wait_for) {
    int code = 0;
    std::string message;
    try {
        fn();
    } catch (const Error& e) {
        code = static_cast<int>(e.code());
        message = e.what();
    } catch (const std::exception& e) {
        code = static_cast<int>(ExitCode::runtime);
        message = e.what();
    }
    // {lowest failing rank, whether every rank failed}, both by MPI_MIN
    int mine[2] = {code ? ctx.rank() : ctx.size(), code ? 1 : 0}, agreed[2] = {0, 0};
    if (wait_for) {
        MPI_Request req = MPI_REQUEST_NULL;
        EF_MPI_CHECK(MPI_Iallreduce(mine, agreed, 2, MPI_INT, MPI_MIN, ctx.world(), &req));
        wait_for(req);
    } else {
        EF_MPI_CHECK(MPI_Allreduce(mine, agreed, 2, MPI_INT, MPI_MIN, ctx.world()));
    }
    const int first = agreed[0];
    if (first == ctx.size()) return;
    // An error only some ranks met (a file missing on one node) says where; one every rank met
    // (a bad config), or rank 0 met (its output), reads as in a single-rank run, unless the run
    // spans several nodes: then rank 0's node is named too (its output folder is not writable
    // there, whatever it is on the node the job was submitted from).
    if (ctx.rank() == first && (first > 0 || ctx.nodes() > 1) && !agreed[1])
        message = ctx.describe(first) + ": " + message;
    EF_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, first, ctx.world()));
    long long len = static_cast<long long>(message.size());
    EF_MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, first, ctx.world()));
    message.resize(static_cast<size_t>(len));
    if (len > 0) EF_MPI_CHECK(MPI_Bcast(message.data(), static_cast<int>(len), MPI_CHAR, first, ctx.world()));
    throw Error(static_cast<ExitCode>(code), message);
}

}  // namespace ef
