// The unit test executable. Its OpenMP threads sleep between parallel
// regions (libcore/app/app.h): the many tiny ops of the model tests otherwise
// spin a second thread through every gap, which on a shared 2-core machine
// made a 0.4 s training test take a minute.
#include "libcore/base/process.h"
#include "tests/support.h"

int main(int argc, char** argv) {
  tfm::prefer_sleeping_threads(argv);
  return tfm::test::run_catch(argc, argv);
}
