// The process of a tfm program, apart from its options (app.h): the version
// it reports and how its OpenMP threads wait. Free of CLI11, so that the
// files that need only these do not compile it.
#pragma once

#include <string>

namespace tfm {

// "tfm 0.1.0 (CUDA 13.0 for 80;90)" or "tfm 0.1.0 (CPU only)".
std::string version_string();

// Makes OpenMP's idle threads sleep instead of spin (OMP_WAIT_POLICY=passive)
// when other work is running on the cores tfm's threads need, unless the
// user chose a policy: call first thing in main. libgomp reads the variable
// when it loads, before main, so the program runs itself again with it set
// (execv; on failure it goes on as it is). A spinning thread waits for the
// next parallel region on a core the other processes need, which makes a
// loaded machine's decoding several times slower; on idle cores it is the
// other way, libgomp's default (spin a moment, then sleep) the faster
// (tests/bench/NOTES.md).
// "Other work" is the kernel's count of runnable tasks, which in a container
// is the host's: a busy host makes a contained run sleep too, the safe side.
void prefer_sleeping_threads(char** argv);

}  // namespace tfm
