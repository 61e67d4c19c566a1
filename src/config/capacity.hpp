// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

namespace ef {

/**
 * What this machine can hold, for the checks made where a size is read (internal): a size
 * that cannot fit is refused with one line naming the key, the bytes it needs and the largest
 * value that fits, before anything is allocated, instead of a std::bad_alloc later. The
 * estimates count the arrays a run keeps (a lower bound of its peak); the limit is the memory
 * this process may use.
 */

/// The memory this process may use, in bytes: the smallest of the physical memory, the
/// control group's `memory.max` (a Slurm job's or a container's share) and RLIMIT_AS/RLIMIT_DATA.
std::uint64_t memory_limit_bytes();

/// Bytes in decimal units with 2 significant digits: "80 TB", "1.5 GB", "512 B".
std::string format_bytes(double bytes);

/// The largest count of items of `bytes_each` (beside `fixed` bytes) that fits memory_limit_bytes().
double largest_count(double bytes_each, double fixed = 0.0);

/// Whether `bytes` exceed memory_limit_bytes().
bool exceeds_memory(double bytes);

/// "needs SIZE of memory for WHAT; the largest this machine's memory (LIMIT) allows is LARGEST":
/// the tail of a refusal; the caller puts the key and value in front.
std::string memory_refusal(double bytes, const std::string& what, const std::string& largest);

}  // namespace ef
