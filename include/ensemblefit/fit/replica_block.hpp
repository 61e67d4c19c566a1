// SPDX-License-Identifier: MIT
#pragma once

// ReplicaBlock moved one floor down, to the result types every layer shares
// (<ensemblefit/core/replica_block.hpp>); this path stays for code built against earlier
// installs (model plugins' tests, tools). New code includes the core header.
#include <ensemblefit/core/replica_block.hpp>
