// gshare's start-up, done at the first cuInit, never at load: preloading
// gshare into a program that does not use CUDA costs one dlvsym and prints
// nothing.
#pragma once

#include "base/options.h"

namespace gshare::intercept {

enum class StartResult { kReady, kDisabled, kRefused };

// Parses the GSHARE_* variables once and configures gshare. kRefused means
// a bad value: its one message has been printed.
StartResult start_runtime();

// After the real cuInit succeeded: hooks start accounting.
void activate_runtime();

const Options& options();

}  // namespace gshare::intercept
