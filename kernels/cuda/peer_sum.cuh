// SPDX-License-Identifier: MIT
#pragma once
// The gradient sum over the GPUs of one host by direct loads from the other GPUs' memory
// (CUDA IPC over NVLink): a deterministic two-phase all-reduce in one kernel, the
// reconstruction's alternative to ncclAllReduce for buffers of a few MB, where NCCL is bound by
// its latency (perf/RESULTS.md, sixth session).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace ef::recon::peer {

constexpr int kMaxRanks = 8;
constexpr int kBlocks = 128;   // at most, the same on every rank: block b only meets block b of the others
/// Sums that may run at once (on different streams), each with its own flags and epochs: the
/// reconstruction sums the object's part of its buffer beside the probe's. Their blocks must all
/// fit on a GPU at once (a block waits at its barriers holding its multiprocessor, and about 100
/// registers per thread leave room for one block per multiprocessor), so two sums at once take
/// kBlocks / kChannels blocks each.
constexpr int kChannels = 2;
constexpr int kThreads = 512;
constexpr int kInFlight = 16;  // remote loads per thread and round
constexpr std::int64_t kExtraCapacity = 1 << 17;  // doubles of loss terms (65536 positions)

/// Everything one launch needs: the peers' buffers as this rank sees them (own ones included).
struct Args {
    double* data[kMaxRanks];      // each rank's gradient buffer
    double* sums[kMaxRanks];      // each rank's part of the sum (phase 2 reads these), same indices as data
    double* extra[kMaxRanks];     // each rank's copy of its loss terms
    unsigned* flags[kMaxRanks];   // each rank's flags: [channel][block][from rank]
    int ranks = 0, rank = 0;
    int channel = 0;
    std::int64_t begin = 0;       // the range summed, in data elements / 2 (double2): [begin, begin + pairs)
    std::int64_t pairs = 0;
    std::int64_t extra_count = 0;
    double* extra_local = nullptr;  // this rank's loss terms, summed in place
    bool narrow = false;            // the sums rounded to float, and moved as floats in phase 2
    unsigned epoch = 0;             // of this call's first barrier (in its channel); +1 for the second
    unsigned long long* trace = nullptr;  // EF_RECON_PEER_TRACE: kTraceSlots sums of nanoseconds per channel
};

/// Trace slots: barrier 1, sum of this rank's part, barrier 2, copies of the others' parts,
/// launches.
constexpr int kTraceSlots = 5;

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
/// Block 0's thread 0 adds the time since `last` to trace slot k.
__device__ __forceinline__ void trace_step(const Args& a, int k, unsigned long long& last) {
    if (!a.trace || blockIdx.x != 0 || threadIdx.x != 0) return;
    const unsigned long long now = global_ns();
    a.trace[a.channel * kTraceSlots + k] += now - last;
    last = now;
}

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/**
 * Block b of every rank meets here: each announces `value` to the others, then waits for
 * theirs. Writes before it are visible to the other ranks' block b after it. Gives up with a
 * trap after about 20 s without the others (a rank gone), so the job fails instead of hanging.
 */
__device__ void barrier(const Args& a, unsigned value) {
    __syncthreads();  // the block's writes, ordered before the (cumulative) fence and release below
    const int t = static_cast<int>(threadIdx.x);
    if (t < a.ranks) {
        __threadfence_system();
        const std::int64_t slot = (static_cast<std::int64_t>(a.channel) * kBlocks + blockIdx.x) * kMaxRanks;
        store_release(a.flags[t] + slot + a.rank, value);
        const unsigned* mine = a.flags[a.rank] + slot + t;
        const long long start = clock64();
        while (static_cast<int>(load_acquire(mine) - value) < 0)
            if (clock64() - start > 40'000'000'000LL) __trap();
    }
    __syncthreads();
}

/**
 * The sum over ranks of a range of `data` (in place on every rank) and of the loss terms. Phase
 * 1: rank r sums part r of the range over all ranks, in rank order (the same bits on every rank
 * and in every run), into its own buffer and its `sums` area; phase 2: it copies the other
 * parts' sums from their `sums` areas. Sums of disjoint ranges may run at once in different
 * channels. Block b handles the same indices of every part on every rank, so
 * barriers per block suffice. With Narrow (for callers that round the summed gradients to
 * float anyway), each part's sum is rounded to float where it is made and moved as floats:
 * every rank then holds the same rounded values, and phase 2 moves half the bytes. The loss
 * terms (a few kB, zero where another rank's positions go) are summed whole by block 0, in double. No barrier at the end: the next call overwrites what others
 * read (sums, extra) only after its first barrier, and gradients are only read in phase 1.
 */
template <int R, bool Narrow>
__global__ void __launch_bounds__(kThreads) sum_kernel(Args a) {
    constexpr int kUnroll = kInFlight / R > 0 ? kInFlight / R : 1;
    const int r = a.rank;
    unsigned long long last = a.trace ? global_ns() : 0;
    const std::int64_t part = (a.pairs + R - 1) / R;
    const std::int64_t end = a.begin + a.pairs;
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
    if (blockIdx.x == 0)
        for (std::int64_t i = threadIdx.x; i < a.extra_count; i += kThreads) a.extra[r][i] = a.extra_local[i];
    barrier(a, a.epoch);
    trace_step(a, 0, last);
    {
        // Every load of a round is issued before the first add: remote latency, not the adds,
        // sets the pace.
        double2* out = reinterpret_cast<double2*>(a.data[r]);
        double2* mine = reinterpret_cast<double2*>(a.sums[r]);
        float2* mine_narrow = reinterpret_cast<float2*>(a.sums[r]);
        const std::int64_t lo = a.begin + r * part, hi = lo + part < end ? lo + part : end;
        for (std::int64_t i0 = lo + first; i0 < hi; i0 += kUnroll * stride) {
            double2 v[R][kUnroll];
#pragma unroll
            for (int p = 0; p < R; ++p)
#pragma unroll
                for (int u = 0; u < kUnroll; ++u)
                    if (i0 + u * stride < hi) v[p][u] = __ldcg(reinterpret_cast<const double2*>(a.data[p]) + i0 + u * stride);
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if (i0 + u * stride >= hi) break;
                double2 s = v[0][u];
#pragma unroll
                for (int p = 1; p < R; ++p) {
                    s.x += v[p][u].x;
                    s.y += v[p][u].y;
                }
                if constexpr (Narrow) {
                    const float2 f = make_float2(static_cast<float>(s.x), static_cast<float>(s.y));
                    out[i0 + u * stride] = make_double2(f.x, f.y);
                    mine_narrow[i0 + u * stride] = f;
                } else {
                    out[i0 + u * stride] = s;
                    mine[i0 + u * stride] = s;
                }
            }
        }
    }
    if (blockIdx.x == 0)
        for (std::int64_t i = threadIdx.x; i < a.extra_count; i += kThreads) {
            double s = __ldcg(a.extra[0] + i);
            for (int p = 1; p < R; ++p) s += __ldcg(a.extra[p] + i);
            a.extra_local[i] = s;
        }
    trace_step(a, 1, last);
    barrier(a, a.epoch + 1);
    trace_step(a, 2, last);
    for (int q = 1; q < R; ++q) {
        const int p = (r + q) % R;  // spread the reads over the links
        const std::int64_t lo = a.begin + p * part, hi = lo + part < end ? lo + part : end;
        using Moved = std::conditional_t<Narrow, float2, double2>;
        const Moved* from = reinterpret_cast<const Moved*>(a.sums[p]);
        double2* to = reinterpret_cast<double2*>(a.data[r]);
        for (std::int64_t i0 = lo + first; i0 < hi; i0 += kInFlight * stride) {
            Moved v[kInFlight];
#pragma unroll
            for (int u = 0; u < kInFlight; ++u)
                if (i0 + u * stride < hi) v[u] = __ldcg(from + i0 + u * stride);
#pragma unroll
            for (int u = 0; u < kInFlight; ++u)
                if (i0 + u * stride < hi) to[i0 + u * stride] = make_double2(v[u].x, v[u].y);
        }
    }
    trace_step(a, 3, last);
    if (a.trace && blockIdx.x == 0 && threadIdx.x == 0) a.trace[a.channel * kTraceSlots + 4] += 1;
}

/**
 * One rank's side: its buffers opened by the others. init() is collective (every rank calls it
 * with the same arguments' shapes); `gather(mine, all, bytes)` gathers `bytes` from every rank
 * into `all`, in rank order (the caller's NCCL communicator).
 */
class Sum {
   public:
    /// `trace` (the EF_RECON_PEER_TRACE diagnostic): time block 0's steps and print them at the end.
    explicit Sum(bool trace = false) : trace_(trace) {}
    Sum(const Sum&) = delete;
    Sum& operator=(const Sum&) = delete;
    ~Sum() {
        print_trace();
        release();
    }

    bool active() const { return args_.ranks > 0; }
    const double* data() const { return active() ? args_.data[args_.rank] : nullptr; }

    /// Opens `data` (the start of a cudaMalloc allocation of at least `count` doubles) to the
    /// other ranks; false with `why` when any rank cannot (then none uses it).
    bool init(double* data, std::int64_t count, int ranks, int rank,
              const std::function<void(const void*, void*, std::size_t)>& gather, std::string& why) {
        release();
        if (ranks < 2 || ranks > kMaxRanks) {
            why = "peer sums take 2 to " + std::to_string(kMaxRanks) + " GPUs";
            return false;
        }
        constexpr size_t flag_bytes = kChannels * kBlocks * kMaxRanks * sizeof(unsigned);
        bool ok = cudaMalloc(reinterpret_cast<void**>(&sums_), static_cast<size_t>(count / 2) * 2 * sizeof(double)) == cudaSuccess &&
                  cudaMalloc(reinterpret_cast<void**>(&extra_), kExtraCapacity * sizeof(double)) == cudaSuccess &&
                  cudaMalloc(reinterpret_cast<void**>(&flags_), flag_bytes) == cudaSuccess &&
                  cudaMemset(flags_, 0, flag_bytes) == cudaSuccess;
        constexpr int kHandles = 4;
        cudaIpcMemHandle_t mine[kHandles]{};
        ok = ok && cudaIpcGetMemHandle(&mine[0], data) == cudaSuccess && cudaIpcGetMemHandle(&mine[1], sums_) == cudaSuccess &&
             cudaIpcGetMemHandle(&mine[2], extra_) == cudaSuccess && cudaIpcGetMemHandle(&mine[3], flags_) == cudaSuccess;
        if (!ok) std::memset(mine, 0, sizeof mine);
        std::vector<cudaIpcMemHandle_t> all(kHandles * static_cast<size_t>(ranks));
        gather(mine, all.data(), sizeof mine);
        Args a;
        a.ranks = ranks;
        a.rank = rank;
        a.pairs = count / 2;
        for (int p = 0; p < ranks && ok; ++p) {
            if (p == rank) {
                a.data[p] = data;
                a.sums[p] = sums_;
                a.extra[p] = extra_;
                a.flags[p] = flags_;
                continue;
            }
            void* ptr[kHandles] = {};
            for (int k = 0; k < kHandles && ok; ++k) {
                const cudaError_t e = cudaIpcOpenMemHandle(&ptr[k], all[static_cast<size_t>(kHandles * p + k)],
                                                           cudaIpcMemLazyEnablePeerAccess);
                if (e != cudaSuccess) {
                    why = std::string("cudaIpcOpenMemHandle of rank ") + std::to_string(p) + ": " + cudaGetErrorString(e);
                    cudaGetLastError();
                    ok = false;
                } else {
                    opened_.push_back(ptr[k]);
                }
            }
            a.data[p] = static_cast<double*>(ptr[0]);
            a.sums[p] = static_cast<double*>(ptr[1]);
            a.extra[p] = static_cast<double*>(ptr[2]);
            a.flags[p] = static_cast<unsigned*>(ptr[3]);
        }
        // Every rank must agree, or some would wait in the kernel for ranks that use NCCL. The
        // votes carry each GPU's multiprocessors: the grids are sized by the fewest.
        int device = 0, sms = 0;
        if (cudaGetDevice(&device) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1)
            sms = 1;
        const std::int32_t me = ok ? sms : 0;
        std::vector<std::int32_t> votes(static_cast<size_t>(ranks));
        gather(&me, votes.data(), sizeof me);
        int fewest = sms;
        for (int p = 0; p < ranks; ++p) {
            fewest = std::min(fewest, static_cast<int>(votes[static_cast<size_t>(p)]));
            if (!votes[static_cast<size_t>(p)] && ok) {
                ok = false;
                why = "rank " + std::to_string(p) + " cannot open the other GPUs' memory (CUDA IPC)";
            }
        }
        if (!ok) {
            release();
            return false;
        }
        if (trace_ &&
            cudaMalloc(reinterpret_cast<void**>(&a.trace), kChannels * kTraceSlots * sizeof(unsigned long long)) == cudaSuccess)
            cudaMemset(a.trace, 0, kChannels * kTraceSlots * sizeof(unsigned long long));
        args_ = a;
        capacity_ = count;
        blocks_ = std::min(kBlocks, fewest);
        return true;
    }
    /// Blocks of a sum alone, and of each of two sums at once (all of them fit on the GPU with
    /// the fewest multiprocessors; every rank has the same numbers).
    int blocks() const { return blocks_; }
    int split_blocks() const { return blocks_ / kChannels; }

    /// Whether run() takes `count` doubles of the buffer from `begin` and `extra_count` loss
    /// terms (else the caller sums with NCCL: every rank decides alike).
    bool fits(std::int64_t begin, std::int64_t count, std::int64_t extra_count) const {
        return active() && begin >= 0 && begin + count <= capacity_ && begin % 2 == 0 && count % 2 == 0 &&
               extra_count <= kExtraCapacity;
    }
    /// Starts the sum of `count` doubles of the buffer given to init(), from `begin`, and of
    /// `extra_count` loss terms at `extra` over the ranks, in place, on `stream` (the caller
    /// checks the launch). Every rank makes the same calls in the same order per channel; calls
    /// in different channels must sum disjoint ranges, and only one may carry loss terms.
    void run(int channel, std::int64_t begin, std::int64_t count, double* extra, std::int64_t extra_count,
             cudaStream_t stream, int blocks, bool narrow = false) {
        Args a = args_;
        a.narrow = narrow;
        a.channel = channel;
        a.begin = begin / 2;
        a.pairs = count / 2;
        a.extra_local = extra;
        a.extra_count = extra ? extra_count : 0;
        a.epoch = epoch_[channel];
        epoch_[channel] += 2;
        launch<2>(a, stream, blocks);
    }

   private:
    /// With the trace (EF_RECON_PEER_TRACE=1): where block 0 of this rank spent each sum, on average.
    void print_trace() const {
        if (!args_.trace) return;
        unsigned long long all[kChannels * kTraceSlots] = {};
        if (cudaMemcpy(all, args_.trace, sizeof all, cudaMemcpyDeviceToHost) != cudaSuccess) return;
        for (int c = 0; c < kChannels; ++c) {
            const unsigned long long* t = all + c * kTraceSlots;
            if (!t[4]) continue;
            const double n = 1e3 * static_cast<double>(t[4]);
            std::fprintf(stderr,
                         "rank %d: peer sums, channel %d (%llu, block 0, microseconds each): barrier %.1f, own part %.1f, "
                         "barrier %.1f, other parts %.1f\n",
                         args_.rank, c, t[4], t[0] / n, t[1] / n, t[2] / n, t[3] / n);
        }
    }
    template <int R>
    static void launch(const Args& a, cudaStream_t stream, int blocks) {
        if constexpr (R < kMaxRanks)
            if (a.ranks != R) return launch<R + 1>(a, stream, blocks);
        if (a.narrow) sum_kernel<R, true><<<blocks, kThreads, 0, stream>>>(a);
        else sum_kernel<R, false><<<blocks, kThreads, 0, stream>>>(a);
    }
    void release() {
        if (args_.trace) cudaFree(args_.trace);
        for (void* p : opened_) cudaIpcCloseMemHandle(p);
        opened_.clear();
        if (sums_) cudaFree(sums_);
        if (extra_) cudaFree(extra_);
        if (flags_) cudaFree(flags_);
        sums_ = extra_ = nullptr;
        flags_ = nullptr;
        args_ = Args{};
    }

    bool trace_;
    Args args_{};
    std::int64_t capacity_ = 0;
    int blocks_ = kBlocks;
    unsigned epoch_[kChannels] = {1, 1};  // flags start at 0
    double* sums_ = nullptr;
    double* extra_ = nullptr;
    unsigned* flags_ = nullptr;
    std::vector<void*> opened_;
};

}  // namespace ef::recon::peer
