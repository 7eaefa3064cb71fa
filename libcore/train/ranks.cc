#include "libcore/train/ranks.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/base/process.h"

namespace tfm::train {
namespace {

// Rank 0 says it; the others exit 1 without a line.
[[noreturn]] void fail_ranks(const dist::Comm& comm, const std::string& why) {
  if (comm.rank() == 0) fail("{}", why);
  throw ReportedError(why);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// The first line where rank `rank`'s agreement_text differs from rank 0's.
std::string first_difference(const std::string& zero, const std::string& other, int rank) {
  const std::vector<std::string> a = lines_of(zero), b = lines_of(other);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)", y = i < b.size() ? b[i] : "(nothing)";
    if (x != y)
      return fmt::format("rank {} differs from rank 0: it has {} where rank 0 has {}", rank, y, x);
  }
  return fmt::format("rank {} differs from rank 0", rank);
}

}  // namespace

std::string agreement_text(const Run& run) {
  std::string d = fmt::format("tfm = {}\ndevice = {}\nprecision = {}\n", version_string(),
                              run.device.is_cuda() ? "cuda" : "cpu", precision_name(run.precision));
  for (size_t c = 0; c < run.train->count(); ++c)
    d += fmt::format("corpus = {}, weight {}\n", (*run.train)[c].identity().str(),
                     run.options.weights.at(c));
  d += fmt::format("dev = {}\nvocabulary = {}\n", run.dev ? run.dev->identity().str() : "none",
                   run.vocab_fingerprint);
  d += fmt::format("checkpoint = {}\n",
                   run.resume_path.empty()
                       ? "none"
                       : fmt::format("{} at update {}",
                                     std::filesystem::absolute(run.resume_path).string(),
                                     run.state.step));
  const std::string init = run.init_path.empty() ? "" : std::filesystem::absolute(run.init_path).string();
  return d + config_file_text(run.config, run.options, init);
}

void agree_on_setup(dist::Comm& comm, const std::function<std::string()>& set_up) {
  std::string mine;
  try {
    mine = set_up();
  } catch (const Error& e) {
    mine = fmt::format("error = {}{}", e.what(), e.where().empty() ? "" : fmt::format(" ({})", e.where()));
  }
  const std::vector<std::string> all = comm.all_gather(mine, "the ranks' setup");
  std::string failures;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r].starts_with("error = "))
      failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", r, all[r].substr(8));
  if (!failures.empty()) fail_ranks(comm, failures);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) fail_ranks(comm, first_difference(all[0], all[r], static_cast<int>(r)));
}

std::optional<StopReason> agreed_stop(dist::Comm& comm, int64_t queued,
                                      std::optional<StopReason> mine) {
  static constexpr StopReason kByWeight[] = {StopReason::max_time, StopReason::interrupted,
                                             StopReason::max_steps, StopReason::max_epochs,
                                             StopReason::early_stop};
  int64_t code = 0;
  for (int64_t i = 0; i < 5; ++i)
    if (mine == kByWeight[i]) code = i + 1;
  const int64_t any = comm.agree(queued, code);
  if (any == 0) return std::nullopt;
  return kByWeight[any - 1];
}

}  // namespace tfm::train
