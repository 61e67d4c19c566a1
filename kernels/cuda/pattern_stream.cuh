// SPDX-License-Identifier: MIT
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"

namespace ef::recon {

/**
 * A rank's diffraction patterns kept in page-locked host memory and copied to the device one
 * mini-batch at a time (run.stream; the data larger than the GPU), for the CUDA worker.
 *
 * queue() copies a batch's rows, in batch order, into the next of kSlots device slots on a copy
 * stream of its own; the copy into a slot waits (on the device, never on the host) for the
 * compute stream's work queued before the slot's previous batch was released, so while the
 * compute stream runs batch t the copies of batches t + 1 .. t + kSlots - 1 can run beside it.
 * wait() makes the compute stream wait for the last queued copy. The kernels then read the slot
 * with the batch's rows numbered 0 .. b - 1: the same values in the same order as from the
 * resident share, so the results are bitwise the same.
 *
 * Timing: events around each copy (its device time) and around the compute stream's wait (the
 * part of the copy that compute did not hide), summed by collect() once the compute stream has
 * been synchronised.
 */
class PatternStream {
   public:
    static constexpr unsigned kSlots = 3;

    PatternStream() = default;
    PatternStream(const PatternStream&) = delete;
    PatternStream& operator=(const PatternStream&) = delete;
    ~PatternStream() {
        for (Timed& t : timed_)
            for (cudaEvent_t e : {t.copy0, t.copy1, t.wait0, t.wait1})
                if (e) cudaEventDestroy(e);
        for (cudaEvent_t e : released_)
            if (e) cudaEventDestroy(e);
        if (copy_) cudaStreamDestroy(copy_);
    }

    /// Page-locked room for `count` floats (the rank's share), contents undefined; waits for
    /// copies that may still read the previous share.
    float* host(std::size_t count) {
        if (copy_) EF_CUDA_CHECK(cudaStreamSynchronize(copy_));
        host_.grow(count);
        return host_.data();
    }
    bool active() const { return host_.size() > 0; }

    /**
     * Queues the copy of rows rows[0 .. b) (n floats each, of host()) into the next slot, after
     * the compute stream's work queued so far has released the slot's previous batch; returns the
     * slot (b x n floats, batch order). Consecutive rows go as one copy.
     */
    const float* queue(cudaStream_t compute, const std::int64_t* rows, std::int64_t b, std::int64_t n) {
        start();
        const unsigned s = next_ % kSlots;
        if (next_ > 0) EF_CUDA_CHECK(cudaEventRecord(released_[(next_ - 1) % kSlots], compute));
        if (next_ >= kSlots) EF_CUDA_CHECK(cudaStreamWaitEvent(copy_, released_[s], 0));
        const std::size_t need = static_cast<std::size_t>(b * n);
        if (slot_[s].size() < need) {  // rare (the first batches): a new slot, once nothing reads the old one
            EF_CUDA_CHECK(cudaDeviceSynchronize());
            slot_[s].grow(need);
        }
        Timed& t = timed(used_++);
        EF_CUDA_CHECK(cudaEventRecord(t.copy0, copy_));
        float* dst = slot_[s].data();
        const auto row_bytes = static_cast<std::size_t>(n) * sizeof(float);
        dsts_.clear();
        srcs_.clear();
        sizes_.clear();
        for (std::int64_t j = 0; j < b;) {
            std::int64_t run = 1;
            while (j + run < b && rows[j + run] == rows[j] + run) ++run;
            dsts_.push_back(dst + j * n);
            srcs_.push_back(host_.data() + rows[j] * n);
            sizes_.push_back(static_cast<std::size_t>(run) * row_bytes);
            j += run;
        }
        copy_rows();
        EF_CUDA_CHECK(cudaEventRecord(t.copy1, copy_));
        bytes_ += static_cast<double>(b) * static_cast<double>(row_bytes);
        ++next_;
        return dst;
    }

    /// The compute stream waits for the last queue()'s copy (timed: wait0 .. wait1).
    void wait(cudaStream_t compute) {
        if (!used_) return;
        Timed& t = timed_[used_ - 1];
        EF_CUDA_CHECK(cudaEventRecord(t.wait0, compute));
        EF_CUDA_CHECK(cudaStreamWaitEvent(compute, t.copy1, 0));
        EF_CUDA_CHECK(cudaEventRecord(t.wait1, compute));
        t.waited = true;
    }

    /// After the compute stream has been synchronised: adds the times of the batches queued
    /// so far. The last one, when the compute stream has not waited for it yet (a synchronize()
    /// between queue() and wait()), stays for the next collect(); an earlier one never waited
    /// for (a pass that reads no patterns) counts its copy only.
    void collect() {
        std::size_t keep = 0;
        for (std::size_t i = 0; i < used_; ++i) {
            Timed& t = timed_[i];
            if (!t.waited && i + 1 == used_) {
                std::swap(timed_[0], t);
                keep = 1;
                break;
            }
            float ms = 0;
            EF_CUDA_CHECK(cudaEventSynchronize(t.copy1));
            EF_CUDA_CHECK(cudaEventElapsedTime(&ms, t.copy0, t.copy1));
            upload_seconds_ += 1e-3 * static_cast<double>(ms);
            if (t.waited) {
                EF_CUDA_CHECK(cudaEventSynchronize(t.wait1));
                EF_CUDA_CHECK(cudaEventElapsedTime(&ms, t.wait0, t.wait1));
                wait_seconds_ += 1e-3 * static_cast<double>(ms);
            }
            t.waited = false;
            ++batches_;
        }
        used_ = keep;
    }

    double upload_seconds() const { return upload_seconds_; }
    double wait_seconds() const { return wait_seconds_; }
    double bytes() const { return bytes_; }
    std::int64_t batches() const { return batches_; }

   private:
    struct Timed {
        cudaEvent_t copy0 = nullptr, copy1 = nullptr, wait0 = nullptr, wait1 = nullptr;
        bool waited = false;
    };
    /**
     * The copies of dsts_/srcs_/sizes_ on the copy stream: one cudaMemcpyBatchAsync (CUDA 13's
     * signature) where the runtime has it, as a batch of 256 rows is 256 separate 64 kB copies
     * (tBL-WSe2: 16 MB per batch) and one call per copy would cost the host about as much as
     * it has per batch; else, or when the driver refuses it, one cudaMemcpyAsync per run of rows.
     */
    void copy_rows() {
#if CUDART_VERSION >= 13000
        if (batch_copies_) {
            cudaMemcpyAttributes attr{};
            attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
            std::size_t first = 0;
            const cudaError_t e = cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), dsts_.size(), &attr,
                                                       &first, 1, copy_);
            if (e == cudaSuccess) return;
            cudaGetLastError();  // not an error that sticks: fall back to one copy per run
            batch_copies_ = false;
        }
#endif
        for (std::size_t i = 0; i < dsts_.size(); ++i)
            EF_CUDA_CHECK(cudaMemcpyAsync(dsts_[i], srcs_[i], sizes_[i], cudaMemcpyHostToDevice, copy_));
    }
    void start() {
        if (copy_) return;
        EF_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
        for (cudaEvent_t& e : released_) EF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    /// The i-th batch's events since the last collect() (made once, then reused).
    Timed& timed(std::size_t i) {
        while (timed_.size() <= i) {
            Timed t;
            for (cudaEvent_t* e : {&t.copy0, &t.copy1, &t.wait0, &t.wait1}) EF_CUDA_CHECK(cudaEventCreate(e));
            timed_.push_back(t);
        }
        return timed_[i];
    }

    cuda::PinnedBuffer<float> host_;
    cuda::DeviceBuffer<float> slot_[kSlots];
    cudaEvent_t released_[kSlots] = {};  // the compute stream's work that read each slot's last batch
    cudaStream_t copy_ = nullptr;
    std::uint64_t next_ = 0;             // batches queued
    std::vector<Timed> timed_;
    std::size_t used_ = 0;               // timed_ entries since the last collect()
    std::vector<void*> dsts_;            // queue()'s copies (copy_rows())
    std::vector<const void*> srcs_;
    std::vector<std::size_t> sizes_;
    bool batch_copies_ = true;           // cudaMemcpyBatchAsync until the driver refuses it
    double upload_seconds_ = 0, wait_seconds_ = 0, bytes_ = 0;
    std::int64_t batches_ = 0;
};

}  // namespace ef::recon
