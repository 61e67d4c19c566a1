// SPDX-License-Identifier: MIT
// The Gram path's set-up made once per node (issue 35, src/fit/fit_plan.cpp): the node's ranks
// hold one copy and each computes a slice of whole output elements, so every array has the bits
// of one process building all of it, and of the CPU worker's own G (kernels/cpu/fit_kernels.cpp).
// The node is played here by threads sharing one block through a TableShare whose publish() is
// a barrier; the MPI window itself is tested by tests/mpi/node_tables.sh.
#include <catch2/catch.hpp>

#include <barrier>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/cpu/table_gemm.hpp"
#include "src/comm/table_share.hpp"
#include "src/fit/correlated.hpp"
#include "src/fit/fit_plan.hpp"
#include "src/model/compiled_model.hpp"

namespace {

/// `size` threads as the ranks of one node: one block, a slice each, publish() a barrier.
struct ThreadNode {
    explicit ThreadNode(int n) : size(n), sync(n) {}
    int size;
    std::barrier<> sync;
    std::shared_ptr<double> block;
};

class ThreadShare final : public ef::TableShare {
   public:
    ThreadShare(ThreadNode& node, int rank) : node_(node), rank_(rank) {}
    std::shared_ptr<double> allocate(std::size_t count) override {
        if (rank_ == 0) {
            auto v = std::make_shared<std::vector<double>>(count, 0.0);
            node_.block = std::shared_ptr<double>(v, v->data());
        }
        node_.sync.arrive_and_wait();
        return node_.block;
    }
    std::pair<int, int> slice(int rows) const override {
        const long long n = rows;
        return {static_cast<int>(n * rank_ / node_.size), static_cast<int>(n * (rank_ + 1) / node_.size)};
    }
    void publish() override { node_.sync.arrive_and_wait(); }
    std::string describe(const std::string&) const override { return ""; }

   private:
    ThreadNode& node_;
    int rank_;
};

bool same(const ef::HostDoubles& a, const ef::HostDoubles& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

ef::FitProblem gram_problem() {
    const ef::FitConfig cfg = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini",
                                                  {"--fit.solver", "normal", "--fit.max_iterations", "4"});
    ef::DataTable data = ef::load_data(cfg);
    const ef::CorrelatedInputs correlated = ef::load_correlated(cfg, data);
    ef::FitProblem pb = ef::make_fit_problem(cfg, std::move(data));
    ef::whiten_problem(pb, correlated, 2);
    return pb;
}

}  // namespace

TEST_CASE("Gram set-up: one copy per node, built in slices, has the bits of one process", "[gram][share]") {
    const ef::FitProblem pb = gram_problem();
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    REQUIRE(plan.path == ef::FitPath::gram);
    const ef::FitInputs alone = ef::fit_inputs(pb, plan);  // as before: no products, one process
    const ef::GramInputs& a = *alone.gram;
    REQUIRE(a.packed_g.empty());
    // The CPU worker's products, as make_fit_context() makes them for itself.
    const int Kt = static_cast<int>(a.Kt);
    const ef::cpu::PackedTable tt = ef::cpu::pack_table(a.tt.data(), Kt, a.n);
    std::vector<double> G(static_cast<size_t>(Kt) * Kt);
    ef::cpu::table_gemm_into(tt, a.wtt.data(), Kt, 2, G.data());
    const ef::cpu::PackedTable g = ef::cpu::pack_table(G.data(), Kt, Kt);
    const size_t panels = static_cast<size_t>((Kt + 3) / 4);

    for (int ranks : {1, 2, 3, 5}) {
        ThreadNode node(ranks);
        std::vector<ef::FitInputs> in(static_cast<size_t>(ranks));
        std::vector<std::jthread> threads;
        for (int r = 0; r < ranks; ++r)
            threads.emplace_back([&, r] {
                ThreadShare share(node, r);
                in[static_cast<size_t>(r)] = ef::fit_inputs(pb, plan, ef::GramBuild{&share, true, 1});
            });
        threads.clear();  // joined
        for (const ef::FitInputs& f : in) {
            const ef::GramInputs& b = *f.gram;
            INFO(ranks << " ranks");
            CHECK(same(a.tt, b.tt));
            CHECK(same(a.wtt, b.wtt));
            CHECK(same(a.f0, b.f0));
            CHECK(a.u0 == b.u0);
            CHECK(a.winv == b.winv);
            CHECK(a.free_idx == b.free_idx);
            REQUIRE(b.packed_tt.size() == panels * 4 * a.n);
            REQUIRE(b.packed_g.size() == panels * 4 * Kt);
            CHECK(std::memcmp(b.packed_tt.data(), tt.a.get(), b.packed_tt.size() * sizeof(double)) == 0);
            CHECK(std::memcmp(b.packed_g.data(), g.a.get(), b.packed_g.size() * sizeof(double)) == 0);
        }
    }
}

TEST_CASE("Gram set-up: the CPU worker's fits from the node's products are those from its own", "[gram][share]") {
    const ef::FitProblem pb = gram_problem();
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    const std::vector<std::int64_t> reps = {0, 1, 2};
    ef::ReplicaBlock own, node;
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), reps.data(), 3, 2, own);
    const ef::FitInputs in = ef::fit_inputs(pb, plan, ef::GramBuild{nullptr, true, 2});
    ef::cpu::fit_replicas(plan, in, reps.data(), 3, 2, node);
    CHECK(own.params == node.params);
    CHECK(own.chi2 == node.chi2);
    CHECK(own.iterations == node.iterations);
    CHECK(own.covariance == node.covariance);
}
