// SPDX-License-Identifier: MIT
#include "src/run/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/io/output_file.hpp"

#include "kernels/core/kernel_tally.hpp"

namespace ef {

namespace {

int phases_in(const PhaseTrace::Event& e) {
    int n = 0;
    for (double s : e.phase) n += s > 0 ? 1 : 0;
    return n;
}

/// Neighbours merged pairwise: half the events, the same span, the phases' seconds added.
void coarsen(std::vector<PhaseTrace::Event>& ev) {
    std::vector<PhaseTrace::Event> out;
    out.reserve(ev.size() / 2 + 1);
    for (size_t i = 0; i < ev.size(); i += 2) {
        PhaseTrace::Event e = ev[i];
        if (i + 1 < ev.size()) {
            e.end = ev[i + 1].end;
            for (size_t p = 0; p < e.phase.size(); ++p) e.phase[p] += ev[i + 1].phase[p];
        }
        out.push_back(e);
    }
    ev.swap(out);
}

std::string json_text(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += (c == '\t' || c == '\n') ? ' ' : c;
    }
    return o;
}

/// One complete event ("X") in microseconds.
void print_event(std::ostringstream& os, const std::string& name, const char* cat, int tid, double begin, double end,
                 const std::string& args) {
    char b[256];
    std::snprintf(b, sizeof b, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                  json_text(name).c_str(), cat, tid, begin * 1e6, (end - begin) * 1e6);
    os << ",\n" << b << ",\"args\":{" << args << "}}";
}

}  // namespace

Phase PhaseTrace::Event::main() const {
    return static_cast<Phase>(std::max_element(phase.begin(), phase.end()) - phase.begin());
}

double PhaseTrace::since_origin(Clock::time_point t) {
    if (!started_) {
        origin_ = t;
        started_ = true;
    }
    return std::chrono::duration<double>(t - origin_).count();
}

void PhaseTrace::add(Phase p, Clock::time_point begin, Clock::time_point end) {
    Event e;
    e.begin = since_origin(begin);
    e.end = since_origin(end);
    const double d = e.end - e.begin;
    e.phase[static_cast<size_t>(p)] = d;
    if (d >= min_) {
        if (has_pending_) push(pending_);
        has_pending_ = false;
        push(e);
        return;
    }
    if (!has_pending_) {
        pending_ = e;
        has_pending_ = true;
    } else {
        pending_.end = e.end;
        pending_.phase[static_cast<size_t>(p)] += d;
    }
    if (pending_.end - pending_.begin >= min_) {
        push(pending_);
        has_pending_ = false;
    }
}

void PhaseTrace::push(const Event& e) {
    if (!events_.empty()) {
        Event& last = events_.back();
        if (phases_in(last) == 1 && phases_in(e) == 1 && last.main() == e.main()) {  // the same phase goes on
            last.end = e.end;
            last.phase[static_cast<size_t>(e.main())] += e.phase[static_cast<size_t>(e.main())];
            return;
        }
    }
    events_.push_back(e);
    if (events_.size() > 4 * max_events_) coarsen(events_);  // memory stays bounded during the run
}

void PhaseTrace::add_device(const std::string& name, Clock::time_point begin, Clock::time_point end) {
    if (device_.size() >= max_events_) {  // bounded: the first kernels of a long run
        ++device_dropped_;
        return;
    }
    device_.push_back(Device{name, since_origin(begin), since_origin(end)});
}

void add_device_intervals(PhaseTrace& trace, const KernelTally& tally) {
    for (const KernelTally::Interval& i : tally.intervals()) trace.add_device(i.name, i.begin, i.end);
    trace.add_device_dropped(tally.dropped_intervals());
}

std::vector<PhaseTrace::Event> PhaseTrace::events() {
    if (has_pending_) push(pending_);
    has_pending_ = false;
    while (events_.size() > max_events_) coarsen(events_);
    return events_;
}

namespace {

/// This rank's events as JSON lines, shifted by `shift` seconds onto the common clock.
std::string rank_events(const PhaseTrace& trace, const std::vector<PhaseTrace::Event>& ev, int rank, double shift) {
    std::ostringstream os;
    for (const PhaseTrace::Event& e : ev) {
        std::string args;
        char b[64];
        for (int p = 0; p < kPhaseCount; ++p) {
            if (e.phase[static_cast<size_t>(p)] <= 0) continue;
            std::snprintf(b, sizeof b, "%s\"%s\":%.9g", args.empty() ? "" : ",", to_string(static_cast<Phase>(p)),
                          e.phase[static_cast<size_t>(p)]);
            args += b;
        }
        print_event(os, to_string(e.main()), "phase", rank, e.begin + shift, e.end + shift, args);
    }
    if (trace.device_intervals().empty()) return os.str();
    char b[256];
    std::snprintf(b, sizeof b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"rank %d: "
                  "device (CUDA events)%s\"}}", 1000 + rank, rank, trace.device_dropped() ? ", first intervals only" : "");
    os << b;
    for (const auto& d : trace.device_intervals()) print_event(os, d.name, "device", 1000 + rank, d.begin + shift, d.end + shift, "");
    return os.str();
}

}  // namespace

void check_trace_path(const std::string& path) {
    // Early, on rank 0, before the input is read: the folder. The output guard (check_output's
    // companions) applies every rule (not an input, not the output, exists / --overwrite).
    try {
        check_output_file(path, "--trace", true, {});
    } catch (const Error& e) {
        throw usage_error("--trace " + path + ": cannot write the trace file (" + e.what() + ")");
    }
}

void write_trace(const MpiContext& ctx, PhaseTrace& trace, const std::string& path,
                 const std::vector<std::string>& placement, const std::string& title) {
    const std::vector<PhaseTrace::Event> ev = trace.events();
    EF_MPI_CHECK(MPI_Barrier(ctx.world()));
    double at_barrier = trace.since_origin(PhaseTrace::Clock::now()), latest = 0;
    EF_MPI_CHECK(MPI_Allreduce(&at_barrier, &latest, 1, MPI_DOUBLE, MPI_MAX, ctx.world()));
    const std::vector<std::string> all = ctx.gather(rank_events(trace, ev, ctx.rank(), latest - at_barrier));
    if (!ctx.is_root()) return;
    std::ostringstream os;
    os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
       << "\"args\":{\"name\":\"" << json_text(title) << "\"}}";
    for (int r = 0; r < ctx.size(); ++r) {
        const std::string row = static_cast<size_t>(r) < placement.size() ? placement[static_cast<size_t>(r)] : "";
        os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << r << ",\"args\":{\"name\":\"rank "
           << r << ": " << json_text(row) << "\"}}";
    }
    for (const std::string& s : all) os << s;
    os << "\n]}\n";
    write_output_file(path, "--trace", os.str());  // beside it, renamed over it when complete
}

}  // namespace ef
