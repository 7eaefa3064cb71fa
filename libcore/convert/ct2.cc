#include "libcore/convert/ct2.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/convert/imported.h"
#include "libcore/io/atomic_file.h"
#include "libcore/model/params.h"

namespace tfm::convert {
namespace {

// CTranslate2's model.bin (include/ctranslate2/models/model.h, and the
// Python spec API's model_spec.py that writes it): the binary version, the
// spec's name and revision, and its DataType enum's codes.
constexpr uint32_t kBinaryVersion = 6;
constexpr std::string_view kSpecName = "TransformerSpec";
constexpr uint32_t kSpecRevision = 7;
enum class CtType : uint8_t { f32 = 0, i8 = 1, i16 = 2, i32 = 3, f16 = 4, bf16 = 5 };
// common_spec.Activation: RELU 0, GELUTanh 1, SWISH 2, GELU 3 (exact, erf).
int8_t activation_code(ops::Activation a) {
  switch (a) {
    case ops::Activation::relu: return 0;
    case ops::Activation::silu: return 2;
    case ops::Activation::gelu: return 3;
  }
  return 0;
}

// One variable of the model: a float tensor (of the checkpoint, or the
// position table) until it is stored, or a scalar attribute.
struct Variable {
  Variable(std::string n, std::vector<int64_t> s, CtType t = CtType::f32, const float* d = nullptr)
      : name(std::move(n)), shape(std::move(s)), data(d), type(t) {}

  std::string name;
  std::vector<int64_t> shape;  // empty: a scalar
  const float* data = nullptr; // float tensors: numel() values (the weights', or the position table's)
  CtType type = CtType::f32;
  std::string bytes;           // scalars; tensors once stored
  std::string alias;           // stored as a pointer to this earlier variable

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  const float* values() const { return data; }
  bool scalar() const { return shape.empty(); }
  // A LinearSpec's or EmbeddingsSpec's weight: what quantization stores in
  // integers with a scale (the spec's "weight_scale" attribute).
  bool quantizable() const { return name.ends_with("/weight"); }
};

template <typename T>
Variable scalar(std::string name, CtType type, T value) {
  Variable v(std::move(name), {}, type);
  v.bytes.assign(reinterpret_cast<const char*>(&value), sizeof value);
  return v;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

// Round to nearest even, as numpy's astype(float16) and torch's bfloat16.
uint16_t to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24 (exact scaling)
    float a;
    std::memcpy(&a, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t v = ax - 0x38000000u;  // exponent rebiased from 127 to 15
  return static_cast<uint16_t>(sign | ((v + 0xfffu + ((v >> 13) & 1u)) >> 13));
}
uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// A later variable equal in shape and values (as floats: 0 == -0, NaN
// equals nothing) to an earlier one in name order is stored as an alias of
// the first such: the spec API's _alias_variables. `vars` is sorted.
void alias_equal(std::vector<Variable>& vars) {
  for (size_t i = 0; i < vars.size(); ++i) {
    Variable& v = vars[i];
    if (v.scalar()) continue;
    const float* a = v.values();
    const int64_t n = v.numel();
    for (size_t j = 0; j < i; ++j) {
      const Variable& u = vars[j];
      if (u.scalar() || !u.alias.empty() || u.shape != v.shape) continue;
      const float* b = u.values();
      int64_t k = 0;
      while (k < n && a[k] == b[k]) ++k;
      if (k == n) {
        v.alias = u.name;
        break;
      }
    }
  }
}

// Stores the float tensors that are no alias as `q` asks (the spec API's
// _quantize): appends the scales it makes.
void store(std::vector<Variable>& vars, Ct2Quantization q) {
  std::vector<Variable> scales;
  for (Variable& v : vars) {
    if (v.scalar() || !v.alias.empty()) continue;
    const float* x = v.values();
    const auto n = static_cast<size_t>(v.numel());
    const bool integer = v.quantizable() && (q == Ct2Quantization::int8 || q == Ct2Quantization::int16);
    if (integer && q == Ct2Quantization::int8) {
      // One scale a row: 127 / max |row| (127 for a row of zeros), in float32.
      const auto cols = static_cast<size_t>(v.shape.back());
      const size_t rows = n / cols;
      std::vector<int8_t> out(n);
      std::vector<float> scale(rows);
      for (size_t r = 0; r < rows; ++r) {
        float amax = 0;
        for (size_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
        if (amax == 0) amax = 127.0f;
        amax = std::max(amax, 127.0f / FLT_MAX);
        scale[r] = 127.0f / amax;
        for (size_t c = 0; c < cols; ++c)
          out[r * cols + c] = static_cast<int8_t>(std::nearbyint(x[r * cols + c] * scale[r]));
      }
      v.type = CtType::i8;
      v.bytes = raw_bytes(out);
      Variable s(v.name + "_scale", {static_cast<int64_t>(rows)});
      s.bytes = raw_bytes(scale);
      scales.push_back(std::move(s));
    } else if (integer) {
      // One scale a matrix: 2^10 / max |W|, the products leaving 12 bits to sum in.
      float amax = 0;
      for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float scale = 1024.0f / amax;
      std::vector<int16_t> out(n);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<int16_t>(std::clamp(std::nearbyint(x[i] * scale), -32768.0f, 32767.0f));
      v.type = CtType::i16;
      v.bytes = raw_bytes(out);
      scales.push_back(scalar(v.name + "_scale", CtType::f32, scale));
    } else if (q == Ct2Quantization::float16 || q == Ct2Quantization::bfloat16) {
      std::vector<uint16_t> out(n);
      for (size_t i = 0; i < n; ++i) out[i] = q == Ct2Quantization::float16 ? to_f16(x[i]) : to_bf16(x[i]);
      v.type = q == Ct2Quantization::float16 ? CtType::f16 : CtType::bf16;
      v.bytes = raw_bytes(out);
    } else {
      v.bytes.assign(reinterpret_cast<const char*>(x), n * sizeof(float));
    }
  }
  for (Variable& s : scales) vars.push_back(std::move(s));
}

// A JSON string as Python's json.dump writes it (ensure_ascii): every byte
// outside ' '..'~' escaped, code points past U+FFFF as surrogate pairs.
std::string py_json_quote(std::string_view s, std::string_view origin) {
  std::string out = "\"";
  const auto u = [&](uint32_t c) { out += fmt::format("\\u{:04x}", c); };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0x80) {
      len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
      TFM_REQUIRE(len > 0 && i + len <= s.size(), "{}: the token '{}' is not UTF-8", origin, printable(s));
      cp = c & (0x7fu >> len);
      for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        TFM_REQUIRE((b & 0xc0) == 0x80, "{}: the token '{}' is not UTF-8", origin, printable(s));
        cp = (cp << 6) | (b & 0x3fu);
      }
    }
    i += len;
    // json's ESCAPE_DCT: these characters by name, the rest below by code.
    static constexpr std::string_view kNamed = "\"\\\n\r\t\b\f", kNames = "\"\\nrtbf";
    if (const size_t at = kNamed.find(static_cast<char>(cp)); cp < 0x80 && at != std::string_view::npos) {
      out += '\\';
      out += kNames[at];
    } else if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp > 0xffff) {
      cp -= 0x10000;
      u(0xd800 + (cp >> 10));
      u(0xdc00 + (cp & 0x3ff));
    } else {
      u(cp);
    }
  }
  return out + "\"";
}

// A float as Python's repr writes the double of its shortest decimal form
// (which is what tfm's config text holds): "1e-05", "0.0001", "1.0".
std::string py_float(float x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The token of every id, and the special ones.
struct Tokens {
  std::vector<std::string> pieces;
  std::string unk, eos, start;
};

Tokens tokens_of(const ModelFile& model, bool ids) {
  const ModelConfig& c = model.config();
  const Vocab* vocab = model.vocab();
  Tokens t;
  if (ids) {
    const int64_t unk = vocab ? vocab->unk_id() : kUnkId;
    for (int64_t i = 0; i < c.vocab_size; ++i) t.pieces.push_back(std::to_string(i));
    if (kPadId < c.vocab_size) t.pieces[kPadId] = "<pad>";
    t.pieces[static_cast<size_t>(c.decoder_start_id)] = "<s>";
    t.pieces[static_cast<size_t>(c.eos_id)] = "</s>";
    if (unk < c.vocab_size) t.pieces[static_cast<size_t>(unk)] = "<unk>";
    t.unk = "<unk>";
  } else {
    TFM_REQUIRE(vocab, "{}: the checkpoint has no vocabulary to name CTranslate2's tokens (name them by id instead)",
                model.path());
    TFM_REQUIRE(vocab->size() <= c.vocab_size, "{}: the vocabulary has {} pieces but the model {} rows",
                model.path(), vocab->size(), c.vocab_size);
    for (int64_t i = 0; i < vocab->size(); ++i) t.pieces.emplace_back(vocab->piece(static_cast<int32_t>(i)));
    // Rows past the pieces (a model sized for more than its tokenizer) get
    // names no text produces, as scripts/tfm-to-ct2.
    for (int64_t i = vocab->size(); i < c.vocab_size; ++i) t.pieces.push_back(fmt::format("<tfm_id_{}>", i));
    t.unk = t.pieces[static_cast<size_t>(vocab->unk_id())];
  }
  t.eos = t.pieces[static_cast<size_t>(c.eos_id)];
  t.start = t.pieces[static_cast<size_t>(c.decoder_start_id)];
  std::set<std::string_view> seen;
  for (size_t i = 0; i < t.pieces.size(); ++i)
    TFM_REQUIRE(seen.insert(t.pieces[i]).second,
                "{}: the token '{}' (id {}) appears twice, which CTranslate2's vocabulary cannot represent",
                model.path(), printable(t.pieces[i]), i);
  return t;
}

// The spec's variables for the checkpoint's weights (`w`, f32 on the CPU):
// TransformerEncoderSpec and TransformerDecoderSpec as the spec API builds
// them, with the attributes it stores as variables.
std::vector<Variable> variables_of(const ModelWeights& w, const Tensor& positions) {
  const ModelConfig& c = w.config();
  const ParamLayout& L = w.layout();
  const int64_t D = c.d_model;
  std::vector<Variable> vars;
  const auto tensor = [&](std::string name, const TensorView& t) {
    vars.emplace_back(std::move(name), std::vector<int64_t>(t.shape().begin(), t.shape().end()), CtType::f32,
                      t.data_as<float>());
  };
  const auto param = [&](std::string name, int id) { tensor(std::move(name), w.param(id)); };
  const auto group = [&](std::string name, int first, int last) {
    tensor(std::move(name), L.view(w.params(), first, last));
  };
  const auto linear = [&](const std::string& p, const LinearIds& l) {
    param(p + "/weight", l.weight);
    param(p + "/bias", l.bias);
  };
  const auto norm = [&](const std::string& p, const NormIds& n) {
    param(p + "/gamma", n.gamma);
    param(p + "/beta", n.beta);
  };
  // q, k and v lie side by side (params.h): CTranslate2's fused projections.
  const auto attention = [&](const std::string& p, const AttentionIds& a, const NormIds& n, bool self) {
    norm(p + "/layer_norm", n);
    if (self) {
      group(p + "/linear_0/weight", a.q.weight, a.v.weight);
      group(p + "/linear_0/bias", a.q.bias, a.v.bias);
    } else {
      linear(p + "/linear_0", a.q);
      group(p + "/linear_1/weight", a.k.weight, a.v.weight);
      group(p + "/linear_1/bias", a.k.bias, a.v.bias);
    }
    linear(fmt::format("{}/linear_{}", p, self ? 1 : 2), a.out);
    if (c.heads * c.d_k != D) vars.push_back(scalar(p + "/head_dim", CtType::i32, static_cast<int32_t>(c.d_k)));
  };
  const auto ffn = [&](const std::string& p, const FfnIds& f, const NormIds& n) {
    norm(p + "/layer_norm", n);
    linear(p + "/linear_0", f.fc1);
    linear(p + "/linear_1", f.fc2);
  };
  const auto stack = [&](const std::string& s, int embed, int pos, const NormIds& final_norm) {
    vars.push_back(scalar(s + "/activation", CtType::i8, activation_code(c.activation)));
    vars.push_back(scalar(s + "/num_heads", CtType::i16, static_cast<int16_t>(c.heads)));
    vars.push_back(scalar(s + "/pre_norm", CtType::i8, static_cast<int8_t>(c.pre_norm)));
    vars.push_back(scalar(s + "/scale_embeddings", CtType::i8, static_cast<int8_t>(c.scale_embeddings)));
    param(s + (s == "encoder" ? "/embeddings_0/weight" : "/embeddings/weight"), embed);
    if (pos >= 0) {
      param(s + "/position_encodings/encodings", pos);
    } else {
      vars.emplace_back(s + "/position_encodings/encodings", std::vector<int64_t>{positions.shape()[0], D},
                        CtType::f32, positions.data_as<float>());
    }
    if (c.pre_norm) norm(s + "/layer_norm", final_norm);
  };

  stack("encoder", L.src_embed, L.src_pos, L.encoder_norm);
  vars.push_back(scalar("encoder/embeddings_merge", CtType::i8, int8_t{0}));  // concat (one embedding)
  vars.push_back(scalar("encoder/multi_query_attention", CtType::i8, int8_t{0}));
  for (size_t l = 0; l < L.encoder.size(); ++l) {
    const std::string p = fmt::format("encoder/layer_{}", l);
    const EncoderLayerIds& e = L.encoder[l];
    attention(p + "/self_attention", e.self_attn, e.self_attn_norm, true);
    ffn(p + "/ffn", e.ffn, e.ffn_norm);
  }

  stack("decoder", L.tgt_embed, L.tgt_pos, L.decoder_norm);
  vars.push_back(scalar("decoder/alibi", CtType::i8, int8_t{0}));
  vars.push_back(scalar("decoder/alibi_use_positive_positions", CtType::i8, int8_t{0}));
  vars.push_back(scalar("decoder/scale_alibi", CtType::i8, int8_t{0}));
  vars.push_back(scalar("decoder/alignment_heads", CtType::i16, int16_t{1}));
  vars.push_back(scalar("decoder/alignment_layer", CtType::i16, int16_t{-1}));  // the last
  vars.push_back(scalar("decoder/start_from_zero_embedding", CtType::i8, int8_t{0}));
  param("decoder/projection/weight", L.out_proj);  // the target embedding's alias when tied
  if (L.out_bias >= 0) param("decoder/projection/bias", L.out_bias);
  for (size_t l = 0; l < L.decoder.size(); ++l) {
    const std::string p = fmt::format("decoder/layer_{}", l);
    const DecoderLayerIds& d = L.decoder[l];
    attention(p + "/self_attention", d.self_attn, d.self_attn_norm, true);
    attention(p + "/attention", d.cross_attn, d.cross_attn_norm, false);
    ffn(p + "/ffn", d.ffn, d.ffn_norm);
  }
  return vars;
}

// model.bin: little-endian, strings as u16 length (with the NUL) + bytes + NUL.
void write_model_bin(const std::string& path, std::vector<Variable>& vars, const std::string& origin) {
  std::sort(vars.begin(), vars.end(), [](const Variable& a, const Variable& b) { return a.name < b.name; });
  io::AtomicFile f(path);
  const auto u8 = [&](uint8_t v) { f.write(&v, 1); };
  const auto u32 = [&](uint32_t v) { f.write(&v, 4); };
  const auto str = [&](std::string_view s) {
    const auto n = static_cast<uint16_t>(s.size() + 1);
    f.write(&n, 2);
    f.write(s);
    u8(0);
  };
  u32(kBinaryVersion);
  str(kSpecName);
  u32(kSpecRevision);
  const auto stored = static_cast<uint32_t>(std::count_if(vars.begin(), vars.end(),
                                                          [](const Variable& v) { return v.alias.empty(); }));
  u32(stored);
  for (const Variable& v : vars) {
    if (!v.alias.empty()) continue;
    TFM_REQUIRE(v.bytes.size() <= UINT32_MAX, "{}: {} is {} bytes, past the 4 GiB a CTranslate2 variable holds",
                origin, v.name, v.bytes.size());
    str(v.name);
    u8(static_cast<uint8_t>(v.shape.size()));
    for (int64_t d : v.shape) u32(static_cast<uint32_t>(d));
    u8(static_cast<uint8_t>(v.type));
    u32(static_cast<uint32_t>(v.bytes.size()));
    f.write(v.bytes);
  }
  u32(static_cast<uint32_t>(vars.size() - stored));
  for (const Variable& v : vars) {
    if (v.alias.empty()) continue;
    str(v.name);
    str(v.alias);
  }
  f.commit();
}

std::string vocabulary_json(const Tokens& t, const std::string& origin) {
  std::string out = "[";
  for (size_t i = 0; i < t.pieces.size(); ++i) out += (i ? ",\n  " : "\n  ") + py_json_quote(t.pieces[i], origin);
  return out + "\n]";
}

std::string config_json(const ModelConfig& c, const Tokens& t, const std::string& origin) {
  // json.dump(indent=2, sort_keys=True) and a newline, as the spec API.
  return fmt::format(
      "{{\n  \"add_source_bos\": false,\n  \"add_source_eos\": {},\n  \"bos_token\": \"<s>\",\n"
      "  \"decoder_start_token\": {},\n  \"eos_token\": {},\n  \"layer_norm_epsilon\": {},\n"
      "  \"multi_query_attention\": false,\n  \"unk_token\": {}\n}}\n",
      c.source_eos, py_json_quote(t.start, origin), py_json_quote(t.eos, origin), py_float(c.layer_norm_eps),
      py_json_quote(t.unk, origin));
}

// The temporary directory beside the target, removed unless committed.
class TempDir {
 public:
  explicit TempDir(const std::string& dir) {
    std::string tmpl = dir + ".tmp-XXXXXX";
    if (!::mkdtemp(tmpl.data())) fail("cannot write {}: {}", dir, std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void committed() { path_.clear(); }

 private:
  std::string path_;
};

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Refuses an existing `dir` (unless replacing a model directory or an empty one).
void check_target(const std::string& dir, bool replace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  TFM_REQUIRE(replace, "{} already exists (a CTranslate2 model directory is replaced only when asked to)", dir);
  TFM_REQUIRE(fs::is_directory(st) && (fs::exists(fs::path(dir) / "model.bin") || fs::is_empty(dir, ec)),
              "{} is not a CTranslate2 model directory (no model.bin) nor empty: it is not replaced", dir);
}

// Moves `tmp` to `dir`: a plain rename that refuses an existing target, or
// an exchange with the old directory, which is then removed.
void publish(const std::string& tmp, const std::string& dir, bool replace) {
  namespace fs = std::filesystem;
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno != EEXIST || !replace) fail("cannot write {}: {}", dir, std::strerror(errno));
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0)
    fail("cannot replace {}: {}", dir, std::strerror(errno));
  std::error_code ec;
  fs::remove_all(tmp, ec);  // now the old model
}

}  // namespace

Ct2Quantization parse_ct2_quantization(std::string_view name) {
  if (name == "none" || name == "float32") return Ct2Quantization::none;
  if (name == "int8") return Ct2Quantization::int8;
  if (name == "int16") return Ct2Quantization::int16;
  if (name == "float16") return Ct2Quantization::float16;
  if (name == "bfloat16") return Ct2Quantization::bfloat16;
  fail("unknown CTranslate2 quantization '{}': expected none (float32), int8, int16, float16 or bfloat16",
       printable(name));
}

void write_ct2(const ModelFile& model, const std::string& dir, const Ct2Options& options) {
  const ModelConfig& c = model.config();
  const std::string& origin = model.path();
  if (c.d_k != c.d_v)
    refuse(origin, "d_v", std::to_string(c.d_v),
           fmt::format("cannot be represented in CTranslate2: its attention has one head size, and d_k = {}", c.d_k));
  const Tokens tokens = tokens_of(model, options.ids);
  check_target(dir, options.replace);

  const std::unique_ptr<ModelWeights> weights = model.load_weights(Device::cpu());
  const Tensor positions = sinusoid_table(c, c.max_positions, DType::f32);
  std::vector<Variable> vars = variables_of(*weights, positions);
  std::sort(vars.begin(), vars.end(), [](const Variable& a, const Variable& b) { return a.name < b.name; });
  alias_equal(vars);
  store(vars, options.quantization);

  std::string parent = std::filesystem::path(dir).parent_path().string();
  TempDir tmp(dir);
  write_model_bin(tmp.path() + "/model.bin", vars, origin);
  io::write_file_atomic(tmp.path() + "/config.json", config_json(c, tokens, origin));
  io::write_file_atomic(tmp.path() + "/shared_vocabulary.json", vocabulary_json(tokens, origin));
  const mode_t mask = ::umask(0);  // mkdtemp's 0700 made what a plain mkdir makes
  ::umask(mask);
  ::chmod(tmp.path().c_str(), 0777 & ~mask);
  sync_dir(tmp.path());
  publish(tmp.path(), dir, options.replace);
  tmp.committed();
  sync_dir(parent.empty() ? "." : parent);
}

}  // namespace tfm::convert
