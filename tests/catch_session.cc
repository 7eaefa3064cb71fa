// Catch's implementation, compiled once for both test executables; their
// main.cc files start it through run_catch (support.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support.h"

namespace tfm::test {

int run_catch(int argc, char** argv, const char* default_spec) {
  Catch::Session session;
  const int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) return rc;
  if (default_spec != nullptr && session.configData().testsOrTags.empty())
    session.configData().testsOrTags.push_back(default_spec);  // applyCommandLine reset the config
  return session.run();
}

}  // namespace tfm::test
