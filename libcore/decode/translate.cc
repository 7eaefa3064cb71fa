#include "libcore/decode/translate.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <string_view>

#include "libcore/base/json.h"
#include "libcore/base/log.h"
#include "libcore/base/progress.h"
#include "libcore/data/line_reader.h"
#include "libcore/data/token_line.h"

namespace tfm {

struct Translator::Item {
  std::vector<int32_t> ids;
  SearchRequest forced;  // its prefix and constraints (the rest is filled in for the search)
  int64_t number = 0;    // 1-based, over all inputs
};

namespace {

void check_options(const TranslateOptions& o) {
  const BeamSearchOptions& s = o.search;
  TFM_REQUIRE(s.beam_size >= 1, "--beam must be at least 1, got {}", s.beam_size);
  TFM_REQUIRE(s.n_best >= 1 && s.n_best <= s.beam_size,
              "--n-best must be between 1 and --beam ({}), got {}", s.beam_size, s.n_best);
  TFM_REQUIRE(s.alpha >= 0 && std::isfinite(s.alpha), "--alpha must be >= 0, got {}", s.alpha);
  TFM_REQUIRE(o.max_len_a >= 0 && o.max_len_b >= 0 && std::isfinite(o.max_len_a) &&
                  std::isfinite(o.max_len_b),
              "--max-len-a and --max-len-b must be >= 0, got {} and {}", o.max_len_a, o.max_len_b);
  TFM_REQUIRE(o.max_tokens >= 1 && o.batch_size >= 0 && o.max_input_len >= 1,
              "--max-tokens and --max-input-len must be positive, --batch-size at least 0");
}

}  // namespace

int64_t max_output_len(const ModelWeights& model, const TranslateOptions& o, int64_t source_len) {
  const double n = std::floor(o.max_len_a * static_cast<double>(source_len) + o.max_len_b);
  int64_t len = static_cast<int64_t>(std::min(n, 1e9));
  const ModelConfig& c = model.config();
  if (c.learned_positions) len = std::min<int64_t>(len, c.max_positions - 1);
  return len;
}

int64_t planned_output_len(const ModelWeights& model, const TranslateOptions& o) {
  int64_t len = max_output_len(model, o, o.max_input_len);
  if (!o.constraints && o.prefix_file.empty()) return len;
  len += o.max_input_len;
  const ModelConfig& c = model.config();
  return c.learned_positions ? std::min<int64_t>(len, c.max_positions - 1) : len;
}

int64_t default_batch_size(Device device) { return device.is_cpu() ? 32 : 256; }

DecoderLimits translate_limits(const ModelWeights& model, const TranslateOptions& o) {
  const ModelConfig& c = model.config();
  const int64_t W = o.search.beam_size;
  const int64_t B = o.batch_size > 0 ? o.batch_size : default_batch_size(model.device());
  DecoderLimits l;
  l.sentences = B;
  // With source_eos the encoder reads one id more than the input has.
  l.src_len = o.max_input_len + c.source_eos;
  l.src_tokens = std::max(o.max_tokens, o.max_input_len) + (c.source_eos ? B : 0);
  l.rows = search_rows(B, o.search);
  l.steps = planned_output_len(model, o) + 1;
  l.top_k = std::min<int64_t>(2 * W, c.vocab_size);
  l.attention_layer = o.search.attention_layer;
  // TFM_CUDA_GRAPHS=0: each step launched kernel by kernel (an A/B run).
  const char* graphs = std::getenv("TFM_CUDA_GRAPHS");
  l.cuda_graph = !(graphs && std::string_view(graphs) == "0");
  // Self-attention pool rows of a batch: positions x rows, T_b x B W, with
  // T_b <= a S_b + b + 1 and B S_b <= src_tokens.
  const double a = o.max_len_a, b = o.max_len_b;
  const double by_tokens = static_cast<double>(W) * (a * static_cast<double>(l.src_tokens) +
                                                     (b + 1) * static_cast<double>(l.sentences));
  const double most = static_cast<double>(l.steps) * static_cast<double>(l.rows);
  l.cache_rows = static_cast<int64_t>(std::ceil(std::min(most, by_tokens)));
  return l;
}

Translator::Translator(const ModelWeights& model, const Vocab* vocab, const TranslateOptions& options)
    : Translator(std::vector<const ModelWeights*>{&model}, {1.0}, vocab, options) {}

Translator::Translator(const std::vector<const ModelWeights*>& models, const std::vector<double>& weights,
                       const Vocab* vocab, const TranslateOptions& options)
    : model_(*models.at(0)), models_(models), weights_(weights), vocab_(vocab), options_(options) {
  check_options(options_);
  const ModelWeights& model = model_;
  const ModelConfig& c = model.config();
  TFM_REQUIRE(weights_.size() == models_.size(), "{} weights for {} models", weights_.size(), models_.size());
  TFM_REQUIRE(!options.shortlist || models_.size() == 1,
              "a shortlist decodes with one model: an ensemble's logits span the vocabulary");
  for (size_t i = 1; i < models_.size(); ++i) {
    const ModelConfig& other = models_[i]->config();
    TFM_REQUIRE(other.vocab_size == c.vocab_size && other.decoder_start_id == c.decoder_start_id &&
                    other.eos_id == c.eos_id && other.source_eos == c.source_eos,
                "model {} of the ensemble has {} ids, start {}, eos {}{}; model 1 {}, {}, {}{}", i + 1,
                other.vocab_size, other.decoder_start_id, other.eos_id, other.source_eos ? ", source eos" : "",
                c.vocab_size, c.decoder_start_id, c.eos_id, c.source_eos ? ", source eos" : "");
    TFM_REQUIRE(other.learned_positions == c.learned_positions &&
                    (!c.learned_positions || other.max_positions == c.max_positions),
                "model {} of the ensemble has other positions than model 1 (learned: {} and {}, {} and {})", i + 1,
                other.learned_positions, c.learned_positions, other.max_positions, c.max_positions);
    TFM_REQUIRE(models_[i]->device() == model.device(), "an ensemble's models must be on one device");
  }
  TranslateOptions& o = options_;
  if (o.batch_size == 0) o.batch_size = default_batch_size(model.device());
  TFM_REQUIRE(vocab_ || (o.ids && !o.detok),
              "the checkpoint embeds no tokenizer, so tfm-decode can read and write ids only "
              "(--ids, without --detok)");
  TFM_REQUIRE(!vocab_ || vocab_->size() <= c.vocab_size,
              "the checkpoint's tokenizer has {} pieces but the model only {} ids",
              vocab_ ? vocab_->size() : 0, c.vocab_size);
  TFM_REQUIRE(o.alignment == Alignment::none || o.search.attention_layer >= 0,
              "internal: an alignment without the attention kept");
  TFM_REQUIRE(o.alignment != Alignment::words || vocab_,
              "--alignment words needs the checkpoint's SentencePiece model to find the words, and it has none");
  TFM_REQUIRE(o.alignment_heads == 0 || o.search.attention_heads,
              "internal: --alignment-heads without every head kept");
  TFM_REQUIRE(o.search.attention_layer < c.decoder_layers,
              "--attention-layer {} is past the model's {} decoder layers", o.search.attention_layer + 1,
              c.decoder_layers);
  // A source's eos (source_eos) takes a position too.
  const int64_t room = c.max_positions - (c.source_eos ? 1 : 0);
  if (c.learned_positions && o.max_input_len > room) {
    log::info("sources are cut at {} pieces, for the model's {} learned positions (--max-input-len {})", room,
              c.max_positions, o.max_input_len);
    o.max_input_len = room;
  }
  // One decoder a thread where the threads take sentences each on their
  // own decoder (search_stream); one line at a time (batch size 1), one.
  const int decoders = o.batch_size == 1 ? 1 : search_threads(model, omp_get_max_threads(), o.thread_work);
  // Every model planned with the first's limits (positions, lengths), so
  // that an ensemble's decoders step alike.
  const DecoderLimits limits = translate_limits(model, o);
  for (int d = 0; d < decoders; ++d) {
    auto& team = decoders_.emplace_back();
    for (const ModelWeights* m : models_)
      team.push_back(std::make_unique<IncrementalDecoder>(*m, limits, o.shortlist));
  }
}

std::string Translator::memory_report() const {
  std::string out;
  for (size_t m = 0; m < models_.size(); ++m) {
    const std::string one = decoders_.front()[m]->memory_report();
    if (models_.size() > 1) out += fmt::format("{}model {}: ", m ? "; " : "", m + 1);
    out += decoders_.size() == 1 ? one : fmt::format("{} (x{}: a decoder a thread)", one, decoders_.size());
  }
  return out;
}

Translator::~Translator() = default;

std::vector<int32_t> Translator::parse(std::string_view line) const {
  return parse_token_line(line, options_.ids ? nullptr : vocab_, model_.config().vocab_size);
}

void Translator::read_item(const std::string& line, Item& item) const {
  if (!options_.constraints) {
    item.ids = parse(line);
    return;
  }
  std::string_view rest = line;
  for (size_t field = 0;; ++field) {
    const size_t tab = rest.find('\t');
    const std::string_view text = rest.substr(0, tab);
    if (field == 0) {
      item.ids = parse(text);
    } else {
      item.forced.constraints.push_back(parse(text));
      TFM_REQUIRE(!item.forced.constraints.back().empty(), "constraint {} (TAB field {}) is empty", field, field + 1);
    }
    if (tab == std::string_view::npos) break;
    rest.remove_prefix(tab + 1);
  }
  TFM_REQUIRE(item.forced.constraints.size() <= kMaxConstraints, "{} constraints, more than {} a line",
              item.forced.constraints.size(), kMaxConstraints);
}

void Translator::read_prefix(data::LineReader& prefixes, Item& item) const {
  std::string line;
  const std::string where = fmt::format("{}:{}", prefixes.path(), prefixes.line_number() + 1);
  if (!prefixes.next(line))
    throw Error(fmt::format("--prefix ends before the input: no prefix for input line {}", prefixes.line_number() + 1),
                where);
  try {
    item.forced.prefix = parse(line);
  } catch (const Error& e) {
    throw Error(fmt::format("the prefix: {}", e.what()), where);
  }
}

void Translator::check_forced(const Item& item, int64_t planned) const {
  const SearchRequest& r = item.forced;
  if (r.prefix.empty() && r.constraints.empty()) return;
  TFM_REQUIRE(!item.ids.empty(), "an empty line has nothing to translate, but a prefix or constraints");
  const auto eos = static_cast<int32_t>(model_.config().eos_id);
  const auto has_eos = [&](const std::vector<int32_t>& t) { return std::find(t.begin(), t.end(), eos) != t.end(); };
  TFM_REQUIRE(!has_eos(r.prefix) && std::none_of(r.constraints.begin(), r.constraints.end(), has_eos),
              "a prefix or constraint holds the end token (id {})", eos);
  TFM_REQUIRE(forced_length(r) <= planned,
              "the prefix and constraints need {} output tokens, over the {} planned (--max-len-a, --max-len-b "
              "and --max-input-len over)", forced_length(r), planned);
}

std::string Translator::tokens_text(const std::vector<int32_t>& ids) const {
  // Ids past the tokenizer's pieces (a model with spare rows) read as <unk>.
  auto known = [&](int32_t id) { return !vocab_ || id < vocab_->size() ? id : vocab_->unk_id(); };
  if (options_.detok) {
    std::vector<int32_t> in;
    for (int32_t id : ids) in.push_back(known(id));
    return vocab_->decode_ids(in);
  }
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    if (options_.ids)
      out += std::to_string(id);
    else
      out += vocab_->piece(known(id));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> Translator::align(const Item& item, const Hypothesis& h) const {
  const TranslateOptions& o = options_;
  const int64_t X = static_cast<int64_t>(item.ids.size());
  const int64_t S = X + (X > 0 && model_.config().source_eos ? 1 : 0);  // the attention's columns
  const int64_t H = o.search.attention_heads ? model_.config().heads : 1;
  const int64_t use = o.alignment_heads > 0 ? std::min(o.alignment_heads, H) : H;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (X == 0) return pairs;
  for (size_t y = 0; y < h.tokens.size(); ++y) {
    int64_t best = 0;
    double best_w = -1;
    for (int64_t x = 0; x < X; ++x) {
      double w = 0;
      for (int64_t hd = 0; hd < use; ++hd) w += h.attention[static_cast<size_t>((static_cast<int64_t>(y) * H + hd) * S + x)];
      if (w > best_w) best_w = w, best = x;
    }
    pairs.emplace_back(best, static_cast<int64_t>(y));
  }
  if (o.alignment == Alignment::words) {
    // Piece positions to word positions, then each word pair once, in order.
    const auto words = [&](const std::vector<int32_t>& ids) {
      std::vector<int64_t> word(ids.size());
      int64_t w = -1;
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::string_view piece = vocab_->piece(ids[i] < vocab_->size() ? ids[i] : vocab_->unk_id());
        if (i == 0 || piece.starts_with("\u2581")) ++w;
        word[i] = w;
      }
      return word;
    };
    const std::vector<int64_t> src = words(item.ids), tgt = words(h.tokens);
    for (auto& [x, y] : pairs) x = src[static_cast<size_t>(x)], y = tgt[static_cast<size_t>(y)];
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  return pairs;
}

std::string Translator::format(const Item& item, const std::vector<Hypothesis>& nbest) const {
  const TranslateOptions& o = options_;
  if (!o.json) {
    std::string out;
    for (const Hypothesis& h : nbest) {
      if (o.search.n_best > 1) out += fmt::format("{}\t", item.number);
      if (o.scores) out += fmt::format("{:.6f}\t", h.score);
      out += tokens_text(h.tokens);
      if (o.alignment != Alignment::none) {
        out += " |||";
        for (const auto& [x, y] : align(item, h)) out += fmt::format(" {}-{}", x, y);
      }
      out += '\n';
    }
    return out;
  }
  JsonWriter j;
  j.begin_object().field("line", item.number).key("hypotheses").begin_array();
  // The attention's columns: the source, and the eos the model's framing adds.
  const int64_t X = static_cast<int64_t>(item.ids.size());
  const int64_t S = X + (X > 0 && model_.config().source_eos ? 1 : 0);
  const int64_t heads = o.search.attention_heads ? model_.config().heads : 1;
  for (const Hypothesis& h : nbest) {
    j.begin_object().key("tokens").begin_array();
    for (int32_t id : h.tokens) {
      if (o.ids)
        j.value(id);
      else
        j.value(vocab_->piece(id < vocab_->size() ? id : vocab_->unk_id()));
    }
    j.end_array();
    if (o.detok) j.field("text", tokens_text(h.tokens));
    j.field("score", h.score).field("log_prob", h.log_prob).key("token_log_probs").begin_array();
    for (float lp : h.token_log_probs) j.value(lp);
    j.end_array();
    if (o.alignment != Alignment::none) {
      j.key("alignment").begin_array();
      for (const auto& [x, y] : align(item, h)) j.begin_array().value(x).value(y).end_array();
      j.end_array();
    }
    if (o.search.attention_layer >= 0 && o.json_attention) {
      // (|Y|, S) or (|Y|, H, S), |Y| = tokens + eos (empty for an empty source).
      j.key("attention").begin_array();
      const int64_t rows = S > 0 ? static_cast<int64_t>(h.attention.size()) / (heads * S) : 0;
      for (int64_t y = 0; y < rows; ++y) {
        if (o.search.attention_heads) j.begin_array();
        for (int64_t hd = 0; hd < heads; ++hd) {
          j.begin_array();
          for (int64_t s = 0; s < S; ++s) j.value(h.attention[static_cast<size_t>((y * heads + hd) * S + s)]);
          j.end_array();
        }
        if (o.search.attention_heads) j.end_array();
      }
      j.end_array();
    }
    j.end_object();
  }
  j.end_array().end_object();
  return j.str() + "\n";
}

size_t Translator::window_lines() const {
  const TranslateOptions& o = options_;
  return o.batch_size == 1 ? 1 : static_cast<size_t>(std::max<int64_t>(1024, 32 * o.batch_size));
}

int64_t Translator::attention_columns(const Item& item) const {
  const auto X = static_cast<int64_t>(item.ids.size());
  return X + (X > 0 && model_.config().source_eos ? 1 : 0);
}

std::optional<Error> Translator::read_window(const std::vector<std::string>& lines, int64_t number,
                                             data::LineReader* prefixes,
                                             const std::function<std::string(size_t)>& where,
                                             std::vector<Item>& items) const {
  const TranslateOptions& o = options_;
  const int64_t planned = planned_output_len(model_, o);
  items.assign(lines.size(), Item{});
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      read_item(lines[i], items[i]);
      if (prefixes) read_prefix(*prefixes, items[i]);
      items[i].number = number + static_cast<int64_t>(i) + 1;
      const int64_t len = static_cast<int64_t>(items[i].ids.size());
      if (len > o.max_input_len) {
        TFM_REQUIRE(o.truncate, "a line of {} tokens is over --max-input-len {} (--truncate cuts it)",
                    len, o.max_input_len);
        log::warn("{}: {} tokens cut to --max-input-len {}", where(i), len, o.max_input_len);
        items[i].ids.resize(static_cast<size_t>(o.max_input_len));
      }
      check_forced(items[i], planned);
    } catch (const Error& e) {
      items.resize(i);
      return Error(e.what(), e.where().empty() ? where(i) : e.where());
    }
  }
  return std::nullopt;
}

void Translator::search_window(std::vector<Item>& items,
                               const std::function<void(size_t, std::vector<Hypothesis>&&)>& done) {
  const TranslateOptions& o = options_;
  const Framing framing = Framing::of(model_.config());
  std::vector<size_t> todo;  // the non-empty lines; empty ones are answered at once
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].ids.empty()) {
      todo.push_back(i);
      lengths.push_back(static_cast<int64_t>(items[i].ids.size()));
      continue;
    }
    done(i, {Hypothesis{}});
  }
  std::vector<size_t> order(todo.size());  // into todo, shortest first (stable)
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return lengths[x] < lengths[y]; });
  std::vector<SearchRequest> requests;
  for (size_t i : order) {
    Item& it = items[todo[i]];
    // Keyed by the line's number: a line's samples are the same however it is batched.
    SearchRequest& r = requests.emplace_back();
    r.source = framing.source(it.ids);
    r.key = static_cast<uint64_t>(it.number);
    r.prefix = std::move(it.forced.prefix);
    r.constraints = std::move(it.forced.constraints);
    r.max_len = std::max(max_output_len(model_, o, static_cast<int64_t>(it.ids.size())), forced_length(r));
  }
  std::vector<Team> teams;
  for (const auto& members : decoders_) {
    Team& t = teams.emplace_back();
    for (const auto& d : members) t.members.push_back(d.get());
    t.weights = weights_;
  }
  teams.resize(search_teams(model_, o.thread_work, teams.size(), requests.size(), o.batch_size));
  search_stream(teams, requests, o.search,
                [&](size_t r, std::vector<Hypothesis>&& nbest) { done(todo[order[r]], std::move(nbest)); });
}

std::vector<LineTranslation> Translator::translate(const std::vector<std::string>& lines) {
  std::unique_ptr<data::LineReader> prefixes;
  if (!options_.prefix_file.empty()) prefixes = std::make_unique<data::LineReader>(options_.prefix_file);
  std::vector<LineTranslation> out(lines.size());
  const size_t window = window_lines();
  std::vector<std::string> chunk;
  std::vector<Item> items;
  for (size_t begin = 0; begin < lines.size(); begin += window) {
    const size_t end = std::min(lines.size(), begin + window);
    chunk.assign(lines.begin() + static_cast<std::ptrdiff_t>(begin), lines.begin() + static_cast<std::ptrdiff_t>(end));
    const auto number = static_cast<int64_t>(begin);
    std::optional<Error> error =
        read_window(chunk, number, prefixes.get(), [&](size_t i) { return fmt::format("line {}", number + i + 1); },
                    items);
    if (error) throw *error;
    search_window(items, [&](size_t i, std::vector<Hypothesis>&& nbest) {
      LineTranslation& t = out[begin + i];
      t.attention_columns = attention_columns(items[i]);
      t.source = std::move(items[i].ids);
      t.nbest = std::move(nbest);
    });
  }
  return out;
}

TranslateTotals Translator::run(const std::vector<std::string>& inputs, std::FILE* out) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const TranslateOptions& o = options_;
  const std::vector<std::string> paths = inputs.empty() ? std::vector<std::string>{"-"} : inputs;
  const size_t window = window_lines();
  TranslateTotals totals;
  int64_t number = 0;  // input lines so far, over all inputs
  // For the ETA: the bytes of every input (-1: one is not a file), of those
  // done, and of the window being translated.
  int64_t total_bytes = 0, done_bytes = 0;
  for (const std::string& path : paths) {
    const int64_t size = data::input_size(path);
    total_bytes = size < 0 || total_bytes < 0 ? -1 : total_bytes + size;
  }
  // The prefixes, a line for each input line (over all inputs).
  std::unique_ptr<data::LineReader> prefixes;
  if (!o.prefix_file.empty()) prefixes = std::make_unique<data::LineReader>(o.prefix_file);
  std::vector<std::string> lines;
  std::vector<Item> items;
  for (const std::string& path : paths) {
    data::LineReader reader(path);
    for (;;) {
      lines.clear();
      const int64_t window_begin = done_bytes + std::max<int64_t>(0, reader.position());
      const size_t n = reader.next_chunk(lines, window);
      if (n == 0) break;
      const int64_t window_end = done_bytes + std::max<int64_t>(0, reader.position());
      const int64_t first_line = reader.line_number() - static_cast<int64_t>(n) + 1;
      const std::optional<Error> error = read_window(
          lines, number, prefixes.get(),
          [&](size_t i) { return fmt::format("{}:{}", reader.path(), first_line + static_cast<int64_t>(i)); },
          items);

      // Search with continuous batching, write each line once it and all
      // before it are done.
      const size_t good = items.size();
      std::vector<std::string> text(good);
      std::vector<bool> done(good, false);
      size_t next = 0;
      auto write_ready = [&] {
        for (; next < good && done[next]; ++next) std::fwrite(text[next].data(), 1, text[next].size(), out);
        if (std::fflush(out) != 0) fail("cannot write the output: {}", std::strerror(errno));
      };
      int64_t window_tokens = 0, tokens_done = 0;  // source tokens of the window, and of it translated
      for (const Item& it : items) window_tokens += static_cast<int64_t>(it.ids.size());
      bool searching = false;  // the empty lines come first, written together
      search_window(items, [&](size_t at, std::vector<Hypothesis>&& nbest) {
        const bool empty = items[at].ids.empty();
        text[at] = format(items[at], nbest);
        done[at] = true;
        ++totals.sentences;
        if (empty) return;
        if (!searching) write_ready(), searching = true;
        totals.tokens += nbest.empty() ? 0 : static_cast<int64_t>(nbest[0].tokens.size());
        tokens_done += static_cast<int64_t>(items[at].ids.size());
        write_ready();
        if (o.progress && o.progress->due()) {
          const double s = std::chrono::duration<double>(Clock::now() - start).count();
          const double rate = s > 0 ? static_cast<double>(totals.tokens) / s : 0;
          std::string text = fmt::format("{} sentences", totals.sentences);
          if (total_bytes >= 0) {  // the bytes read, the window's counted by its tokens translated
            const double at = static_cast<double>(window_begin) +
                              static_cast<double>(window_end - window_begin) *
                                  static_cast<double>(tokens_done) / static_cast<double>(std::max<int64_t>(1, window_tokens));
            text += fmt::format(" ({:.0f}%) | {:.0f} tokens/s | ETA {}",
                                total_bytes > 0 ? 100 * at / static_cast<double>(total_bytes) : 100.0, rate,
                                format_eta(eta_seconds(at, static_cast<double>(total_bytes), s)));
          } else {
            text += fmt::format(" | {:.0f} tokens/s", rate);
          }
          o.progress->report(text, true);
        }
      });
      write_ready();
      number += static_cast<int64_t>(n);
      if (error) throw *error;
    }
    done_bytes += std::max<int64_t>(0, reader.position());
  }
  if (std::string more; prefixes && prefixes->next(more))
    throw Error(fmt::format("--prefix has more lines than the input's {}", number),
                fmt::format("{}:{}", prefixes->path(), prefixes->line_number()));
  if (o.progress) o.progress->end_live();
  totals.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return totals;
}

}  // namespace tfm
