// Measures the machine's streaming read bandwidth with a given number of threads,
// the denominator of the decode roofline (weight bytes per token / token time).
#pragma once

#include <cstddef>

namespace gb::cli {

// Best of `repeats` timed passes over a buffer of `buffer_bytes` (well above the
// last-level cache), in bytes per second.
double measure_read_bandwidth(int num_threads, size_t buffer_bytes = size_t{256} << 20, int repeats = 5);

}  // namespace gb::cli
